"""Golden digests: every bundled scenario gives the very frames it gave when they were recorded.

The engine leans on SimPy's event order and on numpy's random streams, neither of which a
test of one mechanism would notice shifting. Each bundled scenario (the long ones cut to
30 s, past their outages) runs here and the SHA-256 of its ``timeseries``, ``sleeps`` and
``jobs`` written as CSV at full float precision (as ``benchmarks/identity.py`` writes
them) must equal the digest in ``golden_digests.json``. numpy does not promise the same
``default_rng`` streams across releases and SimPy could reorder its heap, so the digests
are recorded with the numpy and simpy versions of ``constraints.txt``; when the installed
ones differ, the test says that in one line instead of reporting a digest mismatch.

A change that is meant to change numbers re-records them: ``python tests/test_golden.py``.
About 5 s on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).with_name("golden_digests.json")
BUNDLED = ROOT / "herdsim" / "scenarios"
SHORTENED = {"outage.yaml": "30s", "stacks.yaml": "30s", "metastable.yaml": "30s",
             "open_loop.yaml": "30s", "autoscale.yaml": "30s", "layers.yaml": "20s"}
PINNED = ("numpy", "simpy")  # the libraries whose releases may change the numbers
SLOW = {"stacks.yaml", "outage.yaml"}  # seconds each: the slow tier checks them


def scenario_files() -> list[Path]:
    """Every bundled scenario but the sweep (its base is a scenario like the others)."""
    return [f for f in sorted(BUNDLED.glob("*.yaml")) if "sweep" not in f.name]


def constraints() -> dict[str, str]:
    """The ``PINNED`` versions that ``constraints.txt`` names (``name==version`` lines)."""
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, _, pinned = line.split("#")[0].strip().partition("==")
        if name in PINNED:
            pins[name] = pinned.strip()
    return pins


def digests(path: Path) -> dict[str, str]:
    """The frames' digests, as ``benchmarks/identity.py``'s child process computes them."""
    import herdsim

    overrides = {"duration": SHORTENED[path.name]} if path.name in SHORTENED else {}
    res = herdsim.run(herdsim.load_scenario(path, overrides))
    out = {}
    for name in ("timeseries", "sleeps", "jobs"):
        frame = getattr(res, name)
        frame = frame.assign(**{c: frame[c].astype(str) for c in frame.columns
                                if str(frame[c].dtype) == "category"})
        text = frame.to_csv(index=False, float_format="%.17g")
        out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def test_the_digests_are_recorded_with_the_constraints_versions():
    """The recorded versions are the constraints file's, and every bundled scenario has
    digests (a new scenario is recorded with the others)."""
    golden = json.loads(GOLDEN.read_text())
    assert golden["versions"] == constraints()
    assert sorted(golden["digests"]) == [f.name for f in scenario_files()]


@pytest.mark.parametrize("path", [
    pytest.param(path, marks=pytest.mark.slow) if path.name in SLOW else path
    for path in scenario_files()], ids=lambda p: p.name)
def test_a_bundled_scenario_gives_its_recorded_frames(path):
    """Same scenario, same seed, same library versions: byte-identical frames."""
    golden = json.loads(GOLDEN.read_text())
    installed = {name: version(name) for name in PINNED}
    if installed != golden["versions"]:
        pytest.fail(f"golden digests were recorded with {golden['versions']} "
                    f"(constraints.txt), installed: {installed}; install with "
                    "`pip install -c constraints.txt -e .[test]`", pytrace=False)
    assert digests(path) == golden["digests"][path.name]


def record() -> None:
    """Rewrite ``golden_digests.json`` from this checkout with the installed versions."""
    installed = {name: version(name) for name in PINNED}
    if installed != constraints():
        sys.exit(f"installed {installed} differ from constraints.txt {constraints()}")
    golden = {"versions": installed,
              "digests": {f.name: digests(f) for f in scenario_files()}}
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    record()
