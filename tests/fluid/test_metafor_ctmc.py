"""herdsim against Metafor's CTMC for its README example (reference numbers regenerated
with Metafor's own code: tests/fluid/metafor_ctmc.json names the commit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from herdsim.config.loading import load_scenario
from herdsim.results.predicted import predict
from herdsim.results.result import run

REFERENCE = json.loads((Path(__file__).parent / "metafor_ctmc.json").read_text())


def readme_example(backlog: int, duration: float = 600.0) -> dict:
    """mu 10, lambda 9.5, a queue of 100, timeout 3 s, 4 retries at the timeout; the
    queue serves the calls whose client left (Metafor's semantics)."""
    return {"name": "metafor_readme", "seed": 1, "duration": duration, "bin": 1.0,
            "workload": {"arrivals": "poisson", "rate": 9.5, "backlog": backlog},
            "workers": {"count": None},
            "downstream": {"concurrency": 1, "queue_limit": 99, "timeout": 3.0,
                           "serve_abandoned": True,
                           "service": {"distribution": "exponential", "mean": 0.1}},
            "retry": {"strategy": "fixed", "base": 0.001, "cap": 1.0, "max_retries": 4}}


def test_the_reference_is_metafors_high_mode():
    """The CTMC's stationary queue sits near full and a full queue takes practically
    forever to drain (the numbers this file checks against)."""
    assert REFERENCE["mean_queue"] > 0.9 * 100
    assert REFERENCE["time_to_drain"] > 1e9


def test_the_fluid_model_shares_the_ctmcs_high_mode_but_not_its_noise():
    """Started full, the fluid model stays full (never drains, as the CTMC's hitting time
    says); started empty it stays empty: at load 0.95 a mean field has no queue, and the
    CTMC reaches its high mode by fluctuations, which a fluid does not have."""
    full = predict(load_scenario(readme_example(100)))
    assert full.summary["state"] == "metastable"
    refused = full.summary["rejected_total"] / full.summary["attempts_total"]
    assert refused > REFERENCE["p_full"]  # most calls find the room full
    empty = predict(load_scenario(readme_example(0)))
    assert empty.summary["state"] == "recovered"


@pytest.mark.slow
def test_the_simulation_reaches_the_high_mode_from_empty_and_stays_there_from_full():
    """From empty, random bunching tips it into the high mode within 600 s (as the CTMC's
    stationary distribution, near full, says); from full it never drains."""
    for backlog in (0, 100):
        result = run(load_scenario(readme_example(backlog)))
        assert result.summary["state"] == "metastable"
        refused = result.summary["rejected_total"] / result.summary["attempts_total"]
        assert refused > REFERENCE["p_full"]
