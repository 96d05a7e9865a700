"""The progress hook: ``herdsim.run(scenario, progress=f)`` calls ``f(now, duration)``."""

from __future__ import annotations

import pandas as pd

import herdsim
from herdsim.config import bundled
from herdsim.model.simulation import PROGRESS_STEPS

SPEC = {"name": "progress", "duration": "10s", "workload": {"rate": 300},
        "workers": {"count": 50},
        "downstream": {"concurrency": 20, "service": {"mean": "50ms"},
                       "outages": [{"start": "4s", "duration": "1s"}]}}


def test_progress_runs_evenly_to_the_end_and_changes_no_number():
    sc = herdsim.load_scenario(SPEC)
    calls: list[tuple[float, float]] = []
    with_hook = herdsim.run(sc, progress=lambda now, total: calls.append((now, total)))
    without = herdsim.run(sc)
    assert len(calls) == PROGRESS_STEPS
    assert all(total == sc.duration for _, total in calls)
    times = [now for now, _ in calls]
    assert times == sorted(times) and times[-1] == sc.duration
    step = sc.duration / PROGRESS_STEPS
    assert all(abs(t - (k + 1) * step) < 1e-9 for k, t in enumerate(times))
    for name in ("timeseries", "sleeps", "jobs"):
        pd.testing.assert_frame_equal(getattr(with_hook, name), getattr(without, name))


def test_the_occ_model_reports_its_end():
    sc = herdsim.load_scenario(bundled.path("aws-2015"))
    calls: list[tuple[float, float]] = []
    herdsim.run(sc, progress=lambda now, total: calls.append((now, total)))
    assert calls == [(sc.duration, sc.duration)]
