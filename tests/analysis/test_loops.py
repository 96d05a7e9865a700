"""Which loop holds it down: each effect named on a run known to be held down by it, the
figures against their definitions, and healthy runs' summaries without the keys."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import herdsim
from herdsim.analysis import loops

BUNDLED = Path(herdsim.__file__).parent / "scenarios"
SHORT = {"duration": "30s"}  # past each trigger (at 10 s), the tail is 27-30 s


def summary(name: str, **overrides) -> dict:
    return herdsim.run(herdsim.load_scenario(BUNDLED / f"{name}.yaml",
                                                 {**SHORT, **overrides})).summary


def test_metastable_yaml_is_held_down_by_retries_alone():
    """metastable.yaml: the healthy server (capacity unchanged) is kept full by retries
    (its comments: ~2,500 calls/s for 700 jobs/s)."""
    s = summary("metastable")
    assert s["state"] == "metastable"
    assert s["sustained_by"] == "workload amplification"
    assert s["tail_calls_per_job"] > loops.AMPLIFICATION
    assert s["tail_capacity_ratio"] == pytest.approx(1.0, abs=0.1)  # serves at full speed


def test_gc_yaml_is_held_down_by_its_degraded_capacity_even_without_retries():
    """gc.yaml without retries: still stuck, and only capacity degradation is named: the
    ratio is 1 / max_factor (every call served at the capped factor)."""
    s = summary("gc", **{"retry.max_retries": 0})
    assert s["state"] == "metastable"
    assert s["sustained_by"] == "capacity degradation"
    assert s["tail_capacity_ratio"] == pytest.approx(1 / 10, rel=0.05)
    assert s["degradation_end"] == s["degradation_peak"] == 10


def test_crashes_in_the_tail_are_named():
    """admission.yaml (exponential, no jitter) crashes again and again after its outage."""
    s = herdsim.run(herdsim.load_scenario(BUNDLED / "admission.yaml")).summary
    assert s["state"] == "metastable" and s["collapses_after_outage"] > 0
    assert "crash-restart cycles" in s["sustained_by"]


def test_a_healthy_run_has_no_such_keys():
    """gc.yaml's spike against a server that does not degrade: recovered, none of them."""
    s = summary("gc", **{"downstream.degradation": None})
    assert s["state"] == "recovered"
    assert not {"sustained_by", "tail_calls_per_job", "tail_capacity_ratio",
                "tail_down_fraction"} & set(s)


def frame(n: int = 100, **columns) -> pd.DataFrame:
    base = {"time": np.arange(n) * 0.1, "arrivals": 10, "attempts": 10, "success": 10,
            "errors": 0, "wasted": 0, "in_flight": 1.0, "downstream_up": 1.0, "crashes": 0}
    return pd.DataFrame({**base, **columns})


class Scn:
    """The fields the tail figures read."""
    duration, bin, last_outage_end = 10.0, 0.1, None

    class downstream:  # noqa: N801 (a scenario's section)
        degradation = "gc"  # a server that can degrade (the rule names it only then)

        class service:  # noqa: N801
            mean = 0.1


def test_the_figures_are_their_definitions():
    """10 calls a bin for 10 jobs, one slot busy serving 10 calls a 0.1 s bin = 100 calls
    per slot-second, at 0.1 s a call: ratio 10 (the gauge is a sample); thresholds
    crossed one by one."""
    assert loops.calls_per_job(frame(), Scn) == 1.0
    assert loops.capacity_ratio(frame(in_flight=10.0), Scn) == pytest.approx(1.0)
    assert loops.sustained_by(frame(in_flight=10.0), Scn) == loops.NONE
    assert loops.sustained_by(frame(in_flight=10.0, attempts=16), Scn) == \
        "workload amplification"
    assert loops.sustained_by(frame(in_flight=20.0), Scn) == "capacity degradation"

    class Plain(Scn):  # no mechanism lowers what a slot serves: a low ratio is downtime
        class downstream(Scn.downstream):  # noqa: N801
            degradation = None

            class overload:  # noqa: N801
                latency_per_call = 0.0

    assert loops.sustained_by(frame(in_flight=20.0), Plain) == loops.NONE
    down = frame(in_flight=10.0, downstream_up=np.r_[np.ones(95), np.zeros(5)])
    assert loops.down_fraction(down, Scn) == pytest.approx(0.5)
    assert loops.sustained_by(down, Scn) == "crash-restart cycles"
