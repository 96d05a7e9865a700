"""Metafor's CTMC (its README example) against herdsim's simulation, Metafor's simulator and
herdsim's fluid model, each row measuring what the CTMC measures (docs/predict.md).

    python benchmarks/metafor_ctmc.py [--seeds 5] [--horizon 10000]     # the table
    python benchmarks/metafor_ctmc.py --metafor DIR --json OUT           # the CTMC's numbers

The example: one server at μ = 10/s (exponential), λ = 9.5/s, ``qsize = 100``, a client
timeout of 3 s and 4 retries (``Server("52", api, qsize=100, orbit_size=20,
thread_pool=1)``). What the CTMC counts, from its code
(``metafor/ctmc_model/single_server/ctmc.py``): its state is (n, o), n in 0..qsize - 1 the
jobs in the system (served at min(n, threads) · μ: waiting and in service, their client
gone or not), o in 0..orbit_size - 1 the jobs in its retry orbit. So the example's queue
holds at most **99** jobs, one of them in service: herdsim's ``concurrency: 1,
queue_limit: 98``, counted as waiting room + in service (Metafor's *simulator* has a
waiting room of 100 beside its thread: 101, which is ``herdsim/experiments/metafor.py``'s
``queue_limit: 100``). ``main_queue_size_average`` is E[n] and ``queue_full_probability``
is P(n = 99) under the stationary distribution: shares of time, which herdsim samples on a
0.1 s grid (:func:`herdsim.experiments.metafor.run`). ``time_to_drain`` is the expected
time from (n, o) = (99, orbit_size - 1) to (0, 0).

``--metafor DIR`` runs Metafor's own CTMC code from DIR (``metafor/ctmc_model/ctmc.py``
and ``metafor/ctmc_model/single_server/ctmc.py`` of github.com/mpi-sws-rse/metafor at the
commit the json names, with empty ``__init__.py`` files; never copied into herdsim): as
it is (its dense ``null_space`` and ``np.linalg.solve``), and with one approximation
removed at a time (:data:`VARIANTS`), solved sparse (the as-is chain both ways: they
agree). Without it the table reads the stored json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as splinalg
from scipy.stats import t as student

from herdsim.config.loading import load_scenario
from herdsim.experiments import metafor
from herdsim.results.predicted import predict

REFERENCE = Path(__file__).resolve().parents[1] / "tests/fluid/metafor_ctmc.json"
QSIZE, ORBIT, LAMBDA, MU, TIMEOUT, RETRIES = 100, 20, 9.5, 10.0, 3, 4
ROOM = QSIZE - 2  # herdsim's waiting room: the CTMC's 99 jobs in the system, less 1 in service
WARM = 100.0  # seconds trimmed from each run before its shares of time
ONCE = "self.lambdaa + n_retry_queue * self.mu_retry_base * tail_main"
VARIANTS = (  # name, orbit size, alpha, the arrival line changed
    ("the orbit 60 (not 20)", 60, 0.25, False),
    ("alpha 1 (not 0.25)", 20, 1.0, False),
    ("alpha 1, orbit 60", 60, 1.0, False),
    ("alpha 1, an arrival counted once (orbit 20)", 20, 1.0, True),
    ("alpha 1, orbit 60, an arrival counted once", 60, 1.0, True),
)


def ctmc_class(metafor_dir: Path, once: bool):
    """Metafor's ``SingleServerCTMC`` from *metafor_dir*; *once*: with its arrival line
    changed so a fresh arrival that will time out enters the queue once, not twice
    (``λ`` becomes ``λ (1 - α · tail)`` beside the ``α λ tail`` into queue and orbit)."""
    sys.path.insert(0, str(metafor_dir))
    from metafor.ctmc_model.single_server import ctmc

    if not once:
        return ctmc.SingleServerCTMC
    source = Path(ctmc.__file__).read_text()
    if source.count(ONCE) != 1:
        raise SystemExit(f"{ctmc.__file__}: the arrival line is not the one this expects")
    changed = source.replace(ONCE, "self.lambdaa * (1 - self.alpha * tail_main)"
                                   " + n_retry_queue * self.mu_retry_base * tail_main")
    space = {"__name__": "metafor_ctmc_once"}
    exec(compile(changed, ctmc.__file__, "exec"), space)  # noqa: S102 - the oracle, run
    return space["SingleServerCTMC"]


def drain_time(chain) -> float | None:
    """Its own ``time_to_drain`` (quiet: it prints every state's hitting time); None when
    the solve comes out negative (ill-conditioned: P(drained by the horizon) says it)."""
    with contextlib.redirect_stdout(io.StringIO()):
        hitting = float(chain.time_to_drain())
    return hitting if hitting > 0 else None


def sparse_numbers(chain, horizon: float) -> dict[str, float]:
    """The stationary figures by a sparse solve, and P(empty by *horizon* | full start)."""
    q = sparse.csr_matrix(chain.Q)
    n = q.shape[0]
    a = q.T.tolil()
    a[n - 1, :] = 1.0
    b = np.zeros(n)
    b[-1] = 1.0
    pi = splinalg.spsolve(a.tocsc(), b)
    top = sum(pi[chain._index_composer(k, chain.retry_queue_size - 1)]
              for k in range(chain.main_queue_size))
    absorbing = q.tolil()
    absorbing[0, :] = 0.0
    start = np.zeros(n)
    start[-1] = 1.0
    reached = splinalg.expm_multiply(absorbing.T.tocsc() * horizon, start)[0]
    return {"mean_queue": float(chain.main_queue_size_average(pi)),
            "p_full": float(chain.queue_full_probability(pi)),
            "retry_orbit_mean": float(chain.retry_queue_size_average(pi)),
            "p_orbit_at_its_top": float(top),
            "time_to_drain": drain_time(chain),
            "p_drained_by_horizon": float(reached)}


def regenerate(metafor_dir: Path, out: Path, horizon: float) -> None:
    """Run Metafor's CTMC code as it is and its variants; write the numbers to *out*."""
    plain = ctmc_class(metafor_dir, once=False)
    began = time.process_time()
    chain = plain(QSIZE, ORBIT, [LAMBDA], [MU], [TIMEOUT], [RETRIES], 1)
    pi = chain.get_stationary_distribution()
    as_is = {"mean_queue": float(chain.main_queue_size_average(pi)[0]),
             "p_full": float(chain.queue_full_probability(pi)[0]),
             "time_to_drain": drain_time(chain),
             "retry_orbit_mean": float(chain.retry_queue_size_average(pi)[0]),
             "cpu_s": round(time.process_time() - began)}
    check = sparse_numbers(chain, horizon)
    gap = max(abs(check[k] - as_is[k]) for k in ("mean_queue", "p_full"))
    print(f"as is: {as_is}; sparse: {check} (stationary figures differ by {gap:.1e})")
    variants = [{"change": "none (the sparse solve of the chain as it is)", **check}]
    for name, orbit, alpha, once in VARIANTS:
        chain = ctmc_class(metafor_dir, once)(QSIZE, orbit, [LAMBDA], [MU], [TIMEOUT],
                                              [RETRIES], 1, alpha=alpha)
        variants.append({"change": name, **sparse_numbers(chain, horizon)})
        print(variants[-1])
    ref = json.loads(out.read_text()) if out.exists() else {}
    ref.update(as_is)
    ref["variants"] = variants
    ref["drain_horizon_s"] = horizon
    out.write_text(json.dumps(ref, indent=2) + "\n")


def interval(values: list[float]) -> str:
    """mean ± the 95% t half-width over the runs."""
    v = np.asarray(values, dtype=float)
    half = student.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return f"{v.mean():.3f} ± {half:.3f}"


def simulate(seeds: int, horizon: float) -> list[str]:
    """herdsim's rows: each client, from a full start (99 calls at t = 0)."""
    rows = []
    for name, late, only in (("Metafor's client (late answers, timeouts retried)", True,
                              True), ("herdsim's default client", False, False)):
        runs = [metafor.run(seed, horizon, late, room=ROOM, only_timeouts=only,
                            backlog=ROOM + 1, warm=WARM) for seed in range(seeds)]
        drains = [r["drain"] for r in runs]
        drained = ", ".join(f"{d:.1f} s" for d in drains if d is not None)
        censored = sum(d is None for d in drains)
        rows.append(f"| herdsim simulation, {name}, {seeds} runs | "
                    f"{interval([r['system_mean_n'] for r in runs])} | "
                    f"{interval([r['system_p_full'] for r in runs])} | "
                    f"{censored}/{seeds} never empty: > {horizon:.0f} s (a lower bound)"
                    f"{'; drained at ' + drained if drained else ''} |")
    return rows


def fluid(horizon: float) -> str:
    """The fluid model's row (herdsim's default client: it refuses the others)."""
    data = metafor.scenario(0, horizon, False, room=ROOM, only_timeouts=False,
                            backlog=ROOM + 1).model_dump(mode="json", exclude_unset=True)
    flows = predict(load_scenario({**data, "bin": 1.0})).timeseries
    late = flows[flows["time"] >= WARM]
    full = float((late["rejected"] > 0).mean())  # a bin that refuses had its room full
    if full == 1.0:  # the room full throughout: waiting and abandoned calls fill it
        mean = f"{ROOM + late['in_flight'].mean():.3f} (room full throughout)"
    else:
        mean = "n/a (its gauge counts no abandoned call)"
    after = flows[flows["time"] > 0]  # (the first bin's gauge is read before the backlog)
    drained = bool((after["waiting"] + after["in_flight"] <= 0).any())
    drains = "empties" if drained else f"never empty in {horizon:.0f} s: stays full"
    return (f"| herdsim fluid, herdsim's default client | {mean} | {full:.3f} (1 s bins "
            f"that refuse) | {drains} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--horizon", type=float, default=10000.0)
    parser.add_argument("--fluid-horizon", type=float, default=300.0)
    parser.add_argument("--metafor", type=Path, help="a copy of Metafor's CTMC code")
    parser.add_argument("--json", type=Path, default=REFERENCE)
    args = parser.parse_args()
    if args.metafor is not None:
        regenerate(args.metafor, args.json, args.horizon)
        return
    ref = json.loads(args.json.read_text())
    sim = metafor.reference()["runs"]
    print(f"| who | mean queue (jobs in the system) | P(full) (share of time) | "
          f"a full queue drains |\n|---|---|---|---|\n"
          f"| Metafor's CTMC (commit {ref['commit'][:7]}), as it is | "
          f"{ref['mean_queue']:.3f} | {ref['p_full']:.3f} | expected after "
          f"{ref['time_to_drain']:.2g} s |")
    for v in ref.get("variants", [])[1:]:
        chance = v["p_drained_by_horizon"]  # (below 1e-9 only its smallness means anything)
        said = f"{chance:.2g}" if chance >= 1e-9 else "< 1e-9"
        print(f"| Metafor's CTMC, {v['change']} | {v['mean_queue']:.3f} | "
              f"{v['p_full']:.3f} | P(within {ref['drain_horizon_s']:.0f} s) {said} |")
    print(f"| Metafor's simulator, {len(sim)} runs: its waiting room of 100 (the one in "
          f"service not counted) | {interval([r['mean_n'] for r in sim])} | "
          f"{interval([r['p_full'] for r in sim])} | not measured |")
    for row in simulate(args.seeds, args.horizon):
        print(row)
    print(fluid(args.fluid_horizon))


if __name__ == "__main__":
    main()
