"""The health rule behind ``recovery_time`` and ``state`` at low rates: its success-rate
window widens until the test means something, so a dead downstream is never "recovered".

The frames are built by hand (Poisson successes before the outage, none after, the
downstream up and no backlog): the rule alone is under test, at any rate and bin.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from herdsim import load_scenario
from herdsim.analysis.summary import RECOVERY_EXPECTED, recovery_time, window_bins

OUTAGE = (60.0, 10.0)  # start, duration (s)


def scenario(rate: float, width: float, open_loop: bool):
    return load_scenario(tiny(
        duration="600s", bin=width, workload={"rate": rate},
        workers={"count": None if open_loop else 10},
        downstream={"outages": [{"start": OUTAGE[0], "duration": OUTAGE[1], "mode": "down"}]}))


def frames(sc, alive_after: bool, seed: int = 0) -> pd.DataFrame:
    """Successes at the offered rate before the outage (and after it when *alive_after*),
    none during it; the downstream up outside it; no backlog anywhere."""
    width = sc.bin
    n = int(round(sc.duration / width))
    time = np.arange(n) * width
    start, end = OUTAGE[0], OUTAGE[0] + OUTAGE[1]
    down = (time >= start) & (time < end)
    alive = (time < start) | ((time >= end) & alive_after)
    success = np.random.default_rng(seed).poisson(sc.workload.rate * width, n) * alive
    zeros = np.zeros(n)
    return pd.DataFrame({"time": time, "success": success.astype(float), "queue_depth": zeros,
                         "delayed": zeros, "in_flight": zeros, "waiting": zeros,
                         "downstream_up": (~down).astype(float)})


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.3, 20_000), width=st.sampled_from([0.01, 0.1, 1.0]),
       open_loop=st.booleans())
def test_a_dead_downstream_is_never_recovered_at_any_rate(rate, width, open_loop):
    """No success at all for the 530 s after the outage, the downstream up and nothing
    queued: the old floor min(0.9 E, E - 3 sqrt E) was zero or less at E <= 9 expected
    successes per window and called this recovered; the widened window expects
    RECOVERY_EXPECTED = 100, where the floor min(0.9 E, E - 4 sqrt E) is 60."""
    sc = scenario(rate, width, open_loop)
    assert recovery_time(frames(sc, alive_after=False), sc) is None


@pytest.mark.parametrize("rate", [0.5, 2.0, 9.5, 1000.0])
def test_a_live_downstream_recovers_at_low_rates_too(rate):
    """The other side: successes back at the offered rate right after the outage are a
    recovery within about one window. Poisson noise must not read as a relapse: the floor
    is 4 standard deviations below the expected count (P about 3e-5 per window at 100
    expected, so under 1% over the run's ~60 independent windows, and the reference's
    own noise over four windows, about 5%, still leaves more than 3 standard deviations)."""
    sc = scenario(rate, 1.0, open_loop=True)
    got = recovery_time(frames(sc, alive_after=True, seed=4), sc)
    seconds = window_bins(sc) * sc.bin
    assert got is not None and got <= seconds + sc.bin


def test_the_window_expects_enough_successes():
    """At 9.5 jobs/s the window is 11 s (105 expected); at 7,000 jobs/s still one second."""
    low, high = scenario(9.5, 1.0, True), scenario(7000, 0.1, False)
    assert window_bins(low) * low.bin * 9.5 >= RECOVERY_EXPECTED
    assert window_bins(high) * high.bin == pytest.approx(1.0)
