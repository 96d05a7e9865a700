"""Byte-identity check: every bundled scenario gives the same frames as a baseline herdsim.

    python benchmarks/identity.py --baseline /path/to/site-packages-of-an-earlier-herdsim

For each bundled scenario (seed as written) both versions run in their own subprocess and
print the SHA-256 of ``timeseries``, ``sleeps`` and ``jobs`` written as CSV (full float
precision). Prints one line per scenario and exits 1 when any digest differs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SCENARIOS = Path(__file__).resolve().parents[1] / "herdsim" / "scenarios"
CHILD = """
import hashlib, json, sys
import herdsim
sc = herdsim.load_scenario(sys.argv[1])
res = herdsim.run(sc)
out = {}
for name in ("timeseries", "sleeps", "jobs"):
    frame = getattr(res, name)
    frame = frame.assign(**{c: frame[c].astype(str) for c in frame.columns
                             if str(frame[c].dtype) == "category"})
    text = frame.to_csv(index=False, float_format="%.17g")
    out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
print(json.dumps(out))
"""


def digests(scenario: Path, path: str | None) -> dict[str, str]:
    env = dict(os.environ)
    if path:
        env["PYTHONPATH"] = path
    out = subprocess.run([sys.executable, "-c", CHILD, str(scenario)], env=env,
                         capture_output=True, text=True, cwd="/")
    if out.returncode != 0:  # e.g. an older herdsim that does not know a newer field
        last = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:120]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True,
                        help="a directory holding an earlier herdsim package (PYTHONPATH)")
    parser.add_argument("--current", default=str(Path(__file__).resolve().parents[1]),
                        help="the herdsim to check (default: this checkout)")
    parser.add_argument("scenarios", nargs="*", help="scenario files (default: all bundled)")
    args = parser.parse_args()
    files = [Path(s).resolve() for s in args.scenarios] or sorted(SCENARIOS.glob("*.yaml"))
    # a sweep's base is a scenario like the others (its grid is tested elsewhere)
    files = [f for f in files if "sweep" not in f.name]
    differ = 0
    for scenario in files:
        old, new = digests(scenario, args.baseline), digests(scenario, args.current)
        same = old == new and "error" not in new
        differ += not same
        shown = " ".join(f"{k}={v}" for k, v in new.items())
        print(f"{'identical' if same else 'DIFFERENT'}  {scenario.name:24s} {shown}")
        if not same:
            print(f"{'':11s}baseline {' '.join(f'{k}={v}' for k, v in old.items())}")
    print(f"{len(files) - differ} of {len(files)} identical" if not differ
          else f"{differ} scenario(s) differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
