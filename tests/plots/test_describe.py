"""The facts line under a figure's title (herdsim/plots/describe.py) says what the run's
retry policy is, in words a user reads: ``max_retries: 0`` is "no retries"."""

from __future__ import annotations

import pytest
from conftest import tiny

from herdsim import load_scenario
from herdsim.plots.describe import facts


@pytest.mark.parametrize(("limit", "shown", "hidden"), [
    (0, "no retries", "≤0"),
    (3, "≤3 retries", "no retries"),
    (None, "no retry limit", "no retries"),
])
def test_the_retry_limit_reads_as_words(limit, shown, hidden):
    line = facts(load_scenario(tiny(retry={"max_retries": limit})))
    assert shown in line
    assert hidden not in line
