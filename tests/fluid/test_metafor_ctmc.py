"""herdsim against Metafor's CTMC for its README example (reference numbers regenerated
with Metafor's own code: tests/fluid/metafor_ctmc.json names the commit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from herdsim.config.loading import load_scenario
from herdsim.errors import ScenarioError
from herdsim.results.predicted import predict
from herdsim.results.result import run

REFERENCE = json.loads((Path(__file__).parent / "metafor_ctmc.json").read_text())


def readme_example(backlog: int, duration: float = 600.0, metafors_client: bool = False
                   ) -> dict:
    """mu 10, lambda 9.5, a queue of 100, timeout 3 s, 4 retries at the timeout; the
    queue serves the calls whose client left (Metafor's semantics). *metafors_client*: a
    late answer completes the request, and only timeouts are retried (a request dropped
    at a full queue is not: its timeout finds it dropped)."""
    client = {"late_answers": True, "retry_on": ["timeout"]} if metafors_client else {}
    return {"name": "metafor_readme", "seed": 1, "duration": duration, "bin": 1.0,
            "workload": {"arrivals": "poisson", "rate": 9.5, "backlog": backlog},
            "workers": {"count": None},
            "downstream": {"concurrency": 1, "queue_limit": 99, "timeout": 3.0,
                           "serve_abandoned": True,
                           "service": {"distribution": "exponential", "mean": 0.1}},
            "retry": {"strategy": "fixed", "base": 0.001, "cap": 1.0, "max_retries": 4,
                      **client}}


def test_the_reference_is_metafors_high_mode():
    """The CTMC's stationary queue sits near full and a full queue takes practically
    forever to drain (the numbers this file checks against)."""
    assert REFERENCE["mean_queue"] > 0.9 * 100
    assert REFERENCE["time_to_drain"] > 1e9


def test_the_fluid_model_shares_the_ctmcs_high_mode_but_not_its_noise():
    """Started full, the fluid model stays full (never drains, as the CTMC's hitting time
    says); started empty it stays empty: at load 0.95 a mean field has no queue, and the
    CTMC reaches its high mode by fluctuations, which a fluid does not have.

    120 s, not the example's 600: the fluid is deterministic and settles within ~10 s;
    its waiting room flat over the second half says the rest of the 600 s adds nothing
    (the integrator is a step loop: 600 s cost about 5 s)."""
    full = predict(load_scenario(readme_example(100, duration=120.0)))
    assert full.summary["state"] == "metastable"
    refused = full.summary["rejected_total"] / full.summary["attempts_total"]
    assert refused > REFERENCE["p_full"]  # most calls find the room full
    empty = predict(load_scenario(readme_example(0, duration=120.0)))
    assert empty.summary["state"] == "recovered"
    for settled in (full, empty):
        late = settled.timeseries["waiting"].iloc[len(settled.timeseries) // 2:]
        assert late.max() - late.min() <= 0.01 * max(late.mean(), 1.0)


@pytest.mark.slow
def test_the_simulation_reaches_the_high_mode_from_empty_and_stays_there_from_full():
    """From empty, random bunching tips it into the high mode within 600 s (as the CTMC's
    stationary distribution, near full, says); from full it never drains."""
    for backlog in (0, 100):
        result = run(load_scenario(readme_example(backlog)))
        assert result.summary["state"] == "metastable"
        refused = result.summary["rejected_total"] / result.summary["attempts_total"]
        assert refused > REFERENCE["p_full"]


def test_the_fluid_model_refuses_metafors_client_naming_its_fields():
    """Late answers, and retrying only timeouts, are not in the fluid model: each refused,
    not predicted without them."""
    late = readme_example(100)
    late["retry"]["late_answers"] = True
    with pytest.raises(ScenarioError, match=r"^retry\.late_answers: "):
        predict(load_scenario(late))
    with pytest.raises(ScenarioError, match=r"^retry\.retry_on: "):
        predict(load_scenario(readme_example(100, metafors_client=True)))


def test_with_metafors_client_the_simulation_still_tips_and_never_drains():
    """Late answers (and no retry of a dropped request) retry less, yet the example keeps
    its high mode: from empty it tips into it, from full it never drains (the CTMC's
    hitting time); fewer calls are refused than with every failure retried."""
    for backlog in (0, 100):
        metafor = run(load_scenario(readme_example(backlog, metafors_client=True)))
        plain = run(load_scenario(readme_example(backlog)))
        assert metafor.summary["state"] == "metastable"
        shares = [r.summary["rejected_total"] / r.summary["attempts_total"]
                  for r in (metafor, plain)]
        assert REFERENCE["p_full"] < shares[0] < shares[1]
