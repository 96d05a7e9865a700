"""What a strategy's sleeps should look like: expected counts per bin, from its cdf or by
Monte Carlo, for the sleeps a run actually drew (same attempts, same previous sleeps)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def sleep_prev(sleeps: pd.DataFrame, base: float) -> pd.DataFrame:
    """*sleeps* of one arm in job order, with ``prev``: the same job's previous sleep
    (``base`` before a first retry), the argument a strategy's ``cdf`` takes."""
    ordered = sleeps.sort_values(["replication", "job", "time", "attempt"], kind="stable")
    prev = ordered.groupby(["replication", "job"])["sleep"].shift(1)
    return ordered.assign(prev=prev.where(ordered["attempt"] > 0, base))


def binned(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts per bin ``(edges[i], edges[i+1]]`` (right-closed, as a CDF difference is)."""
    index = np.searchsorted(edges, values, side="left") - 1
    index = index[(index >= 0) & (index < len(edges) - 1)]
    return np.bincount(index, minlength=len(edges) - 1).astype(float)


def expected_counts(strategy, ordered: pd.DataFrame, edges: np.ndarray,
                    chunk: int = 20_000) -> np.ndarray:
    """Expected sleeps per bin: the sum over sleeps of ``cdf(b1) - cdf(b0)`` at each
    sleep's attempt and prev (*ordered* as from :func:`sleep_prev`)."""
    attempt, prev = ordered["attempt"].to_numpy(), ordered["prev"].to_numpy(dtype=float)
    total = np.zeros(len(edges) - 1)
    x = edges[:, None]
    for lo in range(0, len(attempt), chunk):
        cdf = strategy.cdf(x, attempt[None, lo:lo + chunk], prev[None, lo:lo + chunk])
        total += np.diff(np.broadcast_to(cdf, (len(edges), cdf.shape[1])), axis=0).sum(axis=1)
    return total


def simulated_counts(strategy, ordered: pd.DataFrame, edges: np.ndarray, base: float,
                     draws: int = 50_000, seed: int = 0) -> np.ndarray:
    """Expected sleeps per bin by Monte Carlo: redraw every job's chain of sleeps with
    ``strategy.sleep`` (same attempts; the first ``prev`` is the scenario's *base*, as in
    a run), averaged over enough repeats for *draws* draws."""
    attempts = ordered["attempt"].to_numpy()
    repeats = max(1, draws // max(1, len(attempts)))
    rng = np.random.default_rng(seed)
    stateful = getattr(strategy, "stateful", False)
    values = np.empty(len(attempts) * repeats)
    i = 0
    for _ in range(repeats):
        state = base
        for attempt in attempts.tolist():
            if attempt == 0:
                state = base
            if stateful:
                values[i], state = strategy.sleep(attempt, state, rng)
            else:
                values[i] = state = strategy.sleep(attempt, state, rng)
            i += 1
    return binned(values, edges) / repeats
