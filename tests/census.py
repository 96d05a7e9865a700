"""The long census of generated scenarios: ``python tests/census.py 20000``.

Draws scenarios from the schema (``scenario_gen``), as ``test_any_scenario`` does, runs
every one that validation accepts through the same checks, and prints what it saw:
how many were drawn, refused by validation (by field), too big to run, run, and every
failure by its kind, with one scenario of each written to ``--out``. No shrinking: the
census counts; the test's profile shrinks.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
import traceback
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent))

from scenario_gen import repaired, scenarios  # noqa: E402
from test_any_scenario import (  # noqa: E402
    MAX_CALLS,
    assert_calls_counted_once,
    assert_nothing_negative_or_nan,
    assert_same,
    run,
)

from herdsim.planning.estimate import estimate  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--out", type=Path, default=Path("census-failures"))
    args = parser.parse_args()
    tally: collections.Counter = collections.Counter()
    features: collections.Counter = collections.Counter()
    failures: dict[str, dict] = {}
    started = time.process_time()

    @settings(max_examples=args.n, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def census(data):
        tally["drawn"] += 1
        doc = data.draw(scenarios())
        scenario = repaired(doc, data.draw)
        if scenario is None:
            tally["refused by validation"] += 1
            return
        if estimate(scenario).calls > MAX_CALLS:
            tally["too big for the census"] += 1
            return
        tiers = [scenario.downstream, *scenario.services.values()]
        features[f"{len(tiers)} tier(s)"] += 1
        features.update(f"outage {o.mode}" for t in tiers for o in t.outages)
        features.update(f"admission {t.admission.kind}" for t in tiers if t.admission)
        features.update("hedged edge" for t in tiers for e in t.calls if e.hedging)
        features.update(["open loop" if scenario.workers.count is None else "closed loop"])
        try:
            sim, res = run(scenario)
            assert_calls_counted_once(sim)
            assert_nothing_negative_or_nan(res)
            assert_same(res, run(scenario)[1])
        except Exception as exc:  # noqa: BLE001  # counted, one example kept per kind
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            kind = (f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno}: "
                    f"{str(exc).splitlines()[0][:100] if str(exc) else ''}")
            tally["failed"] += 1
            failures.setdefault(kind, doc)
            return
        tally["ran and passed"] += 1

    census()
    cpu = time.process_time() - started
    print(f"census of {args.n:,} drawn scenarios, {cpu:,.0f} CPU s")
    for key, n in tally.most_common():
        print(f"  {key}: {n:,}")
    print("features among those run:")
    for key, n in sorted(features.items()):
        print(f"  {key}: {n:,}")
    if failures:
        args.out.mkdir(exist_ok=True)
        print("failures, by kind:")
        for i, (kind, doc) in enumerate(failures.items()):
            path = args.out / f"failure-{i}.yaml"
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            print(f"  {kind}  ({path})")


if __name__ == "__main__":
    main()
