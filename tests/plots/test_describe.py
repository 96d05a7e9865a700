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


def test_a_rising_profile_reads_as_its_first_rate_and_its_peak():
    """A profile from 100 to 250 jobs/s read '100 jobs/s poisson (10% of capacity)', as if
    the load held (the census's combined scenario); the peak is named, and the load share
    says it is the first step's. A steady rate reads as before."""
    rising = facts(load_scenario(tiny(workload={"rate": 100, "profile": [
        {"at": 0, "rate": 100}, {"at": "1s", "rate": 250}]})))
    assert "100 jobs/s poisson, up to 250 in its profile (at first, " in rising
    steady = facts(load_scenario(tiny(workload={"rate": 100})))
    assert "100 jobs/s poisson (" in steady and "profile" not in steady


def test_a_graphs_load_names_the_cache_in_front_of_its_busiest_tier(scenarios_dir):
    """layers.yaml's database with a cache: the load share is still the offered calls'
    (16% of 2,500 calls/s), before the cache answers any; the line says so, as a single
    tier's does, rather than read as what reaches the database. A cache on another tier
    (the api's) leaves the database's calls counted as if every request missed."""
    cache = {"size": 200, "keys": {"distribution": "uniform", "count": 1000}}
    own = facts(load_scenario(scenarios_dir / "layers.yaml",
                              overrides={"services.db.cache": cache}))
    assert "(16% of db's capacity 2,500 calls/s before its 200-entry cache, the most " \
           "loaded tier)" in own
    above = facts(load_scenario(scenarios_dir / "layers.yaml",
                                overrides={"services.api.cache": cache}))
    assert "(16% of db's capacity 2,500 calls/s as if every cache missed, the most " \
           "loaded tier)" in above
    plain = facts(load_scenario(scenarios_dir / "layers.yaml"))
    assert "(16% of db's capacity 2,500 calls/s, the most loaded tier)" in plain
