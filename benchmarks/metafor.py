"""Run Metafor's own discrete-event simulator on its README example, seed by seed, and
set herdsim's runs beside them (docs/validation.md, section 6).

    python benchmarks/metafor.py --metafor DIR --seeds 10 --horizon 10000 --csv runs.csv
    python benchmarks/metafor.py --table [--seeds 5]    # herdsim beside the stored runs

DIR holds ``metafor/simulator/{client,job,server}.py`` of github.com/mpi-sws-rse/metafor
(commit 5355c17, its HEAD when this was written) with an empty
``metafor/simulator/__init__.py`` (the package's own pulls in its plotting and training
modules) and ``metafor/__init__.py``. Its code is not part of herdsim and is never copied
into it: this script imports it from DIR. One line of it is changed, and the run refuses
DIR without that change: ``OpenLoopClientWithTimeout.generate`` arms the client timeout
only for a job the server starts at once (``if offered:``); the README's model (and
herdsim) times out every job, so the copy arms it for every job, queued or not (a retry's
timeout is armed for every retry at HEAD already).

The example: one server thread serving at μ = 10/s (exponential), a waiting room of 100,
Poisson arrivals at λ = 9.5/s, a client timeout of 3 s and 4 retries, each retry sent at
the timeout. Built from Metafor's own classes (``Server`` with no downstream, an
unlimited ``TokenBucket`` since ``offer`` reads one, ``OpenLoopClientWithTimeout`` with
no fault) and run with the event loop of its ``Simulator.sim`` (pop the earliest event,
push what it returns, ties in push order), Python's ``random`` seeded with the seed.

Per run it writes: P(full), the share of the 0.1 s sampling grid at which the waiting
room holds 100 jobs; mean N, the waiting room's mean length on that grid; retries per
second (the client's retry count over the horizon) and refusals per second (jobs dropped
at a full waiting room over the horizon). herdsim's comparison
(:mod:`herdsim.experiments.metafor`) samples its own runs on the same grid.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import heapq
import io
import itertools
import math
import random
import sys
from pathlib import Path

MU, LAMBDA, ROOM, TIMEOUT, RETRIES = 10.0, 9.5, 100, 3.0, 4
GRID = 0.1  # seconds between samples of the waiting room
CHANGED = "events.append((t + self.timeout, self.on_timeout, job))  # herdsim: armed"


def run(seed: int, horizon: float) -> dict[str, float]:
    """One run of Metafor's simulator on the README example."""
    from metafor.simulator.client import OpenLoopClientWithTimeout
    from metafor.simulator.job import ExponentialDistribution, exp_job
    from metafor.simulator.server import Context, JoinTracker, Server, TokenBucket

    random.seed(seed)
    server = Server(1, "server_1", ROOM, 1, ExponentialDistribution(MU), None,
                    downstream_server=None, token_bucket=TokenBucket(math.inf, 0.0))
    server.set_context(Context(seed, 1, JoinTracker({1: []})))
    client = OpenLoopClientWithTimeout("client", "request", ExponentialDistribution,
                                       LAMBDA / MU, exp_job(1 / MU), TIMEOUT, RETRIES,
                                       LAMBDA / MU, LAMBDA / MU, [math.inf], 0.0)
    client.server, server.client = server, client
    counter = itertools.count()
    q = [(0.0, next(counter), client.generate, None)]
    samples = int(round(horizon / GRID))
    k, full, total = 0, 0, 0
    with contextlib.redirect_stdout(io.StringIO()) as sink:  # its print per completion
        while q and k < samples:
            t, _, call, payload = heapq.heappop(q)
            while k < samples and k * GRID < t:  # the state held since the last event
                n = server.queue.len()
                full += n >= ROOM
                total += n
                k += 1
            for t2, call2, payload2 in call(t, payload) or ():
                heapq.heappush(q, (t2, next(counter), call2, payload2))
            sink.seek(0)
            sink.truncate()
    return {"seed": seed, "horizon": horizon, "p_full": full / samples,
            "mean_n": total / samples, "retries_per_s": client.retries / horizon,
            "refusals_per_s": server.dropped_queue_full / horizon}


def table(seeds: int) -> None:
    """Metafor's stored runs, the interval a mean of *seeds* herdsim runs is held to, and
    herdsim's runs (seeds 0, 1, …) without and with late answers: mean ± 95% t."""
    import numpy as np
    from scipy import stats

    from herdsim.experiments import metafor

    reference = metafor.reference()["runs"]
    horizon = reference[0]["horizon"]
    arms = {"Metafor": reference}
    for late in (False, True):
        arms[f"herdsim, late answers {'on' if late else 'off'}"] = [
            metafor.run(seed, horizon, late) for seed in range(seeds)]
    for name, runs in arms.items():
        cells = []
        for metric in metafor.METRICS:
            v = np.array([run[metric] for run in runs])
            half = stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
            cells.append(f"{metric} {v.mean():.4f} ± {half:.4f} [{v.min():.4f}, {v.max():.4f}]")
            if name == "Metafor":
                wide = (stats.t.ppf(0.995, len(v) - 1) * v.std(ddof=1)
                        * np.sqrt(1 / len(v) + 1 / seeds))
                cells[-1] += f" held to [{v.mean() - wide:.4f}, {v.mean() + wide:.4f}]"
        print(f"{name} ({len(runs)} runs): " + " | ".join(cells))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--metafor", type=Path)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--horizon", type=float, default=10000.0)
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--table", action="store_true", help="herdsim beside the stored runs")
    args = parser.parse_args(argv)
    if args.table:
        table(args.seeds)
        return
    if args.metafor is None or args.csv is None:
        parser.error("--metafor and --csv are needed to run Metafor (or give --table)")
    client = (args.metafor / "metafor/simulator/client.py").read_text()
    if CHANGED not in client:
        sys.exit(f"{args.metafor}: the client timeout is not armed for every job (see --help)")
    sys.path.insert(0, str(args.metafor))
    rows = []
    for seed in range(args.seeds):
        rows.append(run(seed, args.horizon))
        print(rows[-1], flush=True)
    with args.csv.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


if __name__ == "__main__":
    main()
