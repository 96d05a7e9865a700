"""The census of issue 36's classes: hostile inputs and their clean outcome.

    python benchmarks/hostile_census.py --tree /path/to/a/checkout [--only 3,5]

Classes 3, 5, 6, 7 and 8 are here; 1, 2 and 4 in ``hostile_cases_124.py``.

Each case is a command (``herdsim ...`` through ``python -m herdsim``) or a Python API call,
run in a fresh folder with ``PYTHONPATH`` set to *tree*, with the outcome it must have:

- ``refuse``: exit code 2, exactly one line on stderr that names the file or field (a
  given word), no traceback, nothing left behind where an output was asked for;
- ``ok``: exit code 0, no traceback, and the case's own check of what it produced;

each within a time bound (a case past it is killed and counts as a hang). It prints one
line per case and the counts per class (clean / cases), the numbers of the report.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

TINY = """\
name: tiny
seed: 1
duration: 1s
workload: {rate: 10}
workers: {count: 2}
downstream: {concurrency: 2, service: {distribution: exponential, mean: 5ms}}
"""
HEAD = """\
name: chain
seed: 1
duration: 2s
workload: {rate: 5}
workers: {count: 2}
downstream:
  concurrency: 4
  service: {distribution: exponential, mean: 5ms}
  calls: [{service: s0, timeout: 1s}]
"""


def chain(n: int, cycle: bool = False) -> str:
    """A scenario whose downstream calls s0, s0 calls s1 ... (s(n-1) calls s0 if *cycle*)."""
    lines = [HEAD, "services:\n"]
    for i in range(n):
        nxt = f"s{i + 1}" if i < n - 1 else ("s0" if cycle else None)
        lines.append(f"  s{i}: {{calls: [{{service: {nxt}, timeout: 1s}}]}}\n" if nxt
                     else f"  s{i}: {{}}\n")
    return "".join(lines)


def fan(n: int) -> str:
    """A downstream calling *n* services side by side (depth 2, many services)."""
    calls = ", ".join(f"{{service: s{i}, timeout: 1s}}" for i in range(n))
    return (HEAD.replace("calls: [{service: s0, timeout: 1s}]", f"calls: [{calls}]")
            + "services:\n" + "".join(f"  s{i}: {{}}\n" for i in range(n)))


def silent_peer() -> tuple[subprocess.Popen, int]:
    """A process that accepts TCP connections on a free port and never answers."""
    code = textwrap.dedent("""
        import socket, sys
        s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(64)
        print(s.getsockname()[1], flush=True)
        held = []
        while True:
            held.append(s.accept()[0])
    """)
    peer = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return peer, int(peer.stdout.readline())  # type: ignore[union-attr]


@dataclass
class Case:
    """One hostile input: *shell* (``herdsim`` is the command line, ``API`` a Python script
    run with ``python -c``) and the outcome it must have."""

    cls: str
    name: str
    shell: str
    expect: str  # "refuse" or "ok"
    word: str = ""  # a refusal's line must name this (file or field)
    bound: float = 60.0  # seconds
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path, subprocess.CompletedProcess], str | None] | None = None
    leftover: str = ""  # an output path that must not exist after a refusal
    script: str = ""  # the API case's Python


def api(body: str) -> str:
    """A Python script: *body* run, a herdsim error one line on stderr and exit code 2."""
    return textwrap.dedent("""
        import sys, numpy as np, herdsim
        from herdsim.errors import HerdsimError
        try:
        {body}
        except HerdsimError as exc:
            print(str(exc), file=sys.stderr)
            sys.exit(2)
    """).replace("{body}", textwrap.indent(textwrap.dedent(body).strip(), "    "))


def write(name: str, text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text(text)


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def run(folder: Path) -> None:
        for step in steps:
            step(folder)
    return run


def fifo(name: str) -> Callable[[Path], None]:
    return lambda folder: os.mkfifo(folder / name)


def trace_file(name: str, times: list[str]) -> Callable[[Path], None]:
    return write(name, "time\n" + "\n".join(times) + "\n")


def long_trace(folder: Path) -> None:
    import random

    rng, t, lines = random.Random(2), 0.0, ["time"]
    for _ in range(100_000):
        t += rng.expovariate(1.0)
        lines.append(f"{t:.3f}")
    (folder / "long.csv").write_text("\n".join(lines) + "\n")


def run_dir_with(scenario: str) -> Callable[[Path], None]:
    """A run folder of TINY whose scenario.yaml is replaced by *scenario* and resealed."""
    def make(folder: Path) -> None:
        (folder / "tiny.yaml").write_text(TINY)
        subprocess.run([sys.executable, "-m", "herdsim", "run", "tiny.yaml", "-q", "--out",
                        "r"], cwd=folder, check=True, env=os.environ | {"PYTHONPATH": TREE},
                       timeout=120)
        (folder / "r" / "scenario.yaml").write_text(scenario)
        subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from "
                        "herdsim.outputs.atomic import seal; seal(Path(sys.argv[1]))",
                        str(folder / "r")], check=True, env=os.environ | {"PYTHONPATH": TREE})
    return make


SWEEP = "herdsim sweep tiny.yaml --grid workers.count=2,3 --replications 2 --out sw -q"


def forged_sweep(edit: Callable[[dict], None]) -> Callable[[Path], None]:
    """A finished sweep of TINY with one task file edited by *edit* and the tables gone."""
    def make(folder: Path) -> None:
        (folder / "tiny.yaml").write_text(TINY)
        subprocess.run([sys.executable, "-m", "herdsim", *SWEEP.split()[1:]], cwd=folder,
                       check=True, timeout=300, env=os.environ | {"PYTHONPATH": TREE})
        path = folder / "sw" / "tasks" / "c00001-a00-r0001.json"
        row = json.loads(path.read_text())
        (folder / "genuine.json").write_text(json.dumps(row))
        edit(row)
        path.write_text(json.dumps(row))
        for name in ("sweep.csv", "sweep.parquet"):
            (folder / "sw" / name).unlink()
    return make


def genuine_row(folder: Path, result: subprocess.CompletedProcess) -> str | None:
    """The resumed sweep's table holds the task as it runs, not as it was edited."""
    import csv

    genuine = json.loads((folder / "genuine.json").read_text())
    rows = {r["task"]: r for r in csv.DictReader((folder / "sw" / "sweep.csv").open())}
    row = rows["c00001-a00-r0001"]
    for key in ("strategy", "seed", "jobs_submitted", "jobs_succeeded", "succeeded_fraction"):
        same = row[key] == str(genuine[key]) if isinstance(genuine[key], str) else \
            abs(float(row[key]) - genuine[key]) <= 1e-9 * max(1.0, abs(genuine[key]))
        if not same:
            return f"sweep.csv holds the forged {key} {row[key]} (the run: {genuine[key]})"
    return None


def inflate(row: dict) -> None:
    """Consistent in itself, impossible for a 1 s run at 10 jobs/s."""
    more = 1_000_000
    row.update(jobs_submitted=row["jobs_submitted"] + more,
               jobs_succeeded=row["jobs_succeeded"] + more)
    row["succeeded_fraction"] = row["jobs_succeeded"] / row["jobs_submitted"]


def quiet_stderr(_folder: Path, result: subprocess.CompletedProcess) -> str | None:
    return f"stderr under -q: {result.stderr.strip()[:80]!r}" if result.stderr.strip() else None


def no_library_text(_folder: Path, result: subprocess.CompletedProcess) -> str | None:
    lines = [line for line in result.stderr.splitlines()
             if "Warning" in line or ".py:" in line or "glyph" in line.lower()]
    if any("UserWarning" in line or ".py:" in line for line in lines) or len(lines) > 1:
        return f"library text on stderr: {lines[0][:80]!r}"
    return None


def silent_and_saved(out: str) -> Callable[[Path, subprocess.CompletedProcess], str | None]:
    def check(folder: Path, result: subprocess.CompletedProcess) -> str | None:
        if result.stderr.strip():
            return f"stderr: {result.stderr.strip()[:80]!r}"
        return None if (folder / out / "summary.json").exists() else f"{out} was not saved"
    return check


def one_line(_folder: Path, result: subprocess.CompletedProcess) -> str | None:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    return None if len(lines) == 1 else f"{len(lines)} lines on stderr (expected one)"


def profile_readable(folder: Path, result: subprocess.CompletedProcess) -> str | None:
    """Written: herdsim's own scenario reader takes it. Refused: in one line, no file."""
    path = folder / "p.yaml"
    if result.returncode == 2:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        return None if len(lines) == 1 and not path.exists() else "refused untidily"
    probe = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; from "
                            "herdsim.config.reading import read_text, parse_yaml; "
                            "parse_yaml(read_text(Path(sys.argv[1])))", str(path)],
                           capture_output=True, text=True, env=os.environ | {"PYTHONPATH": TREE})
    return None if probe.returncode == 0 else \
        f"wrote a profile the reader refuses: {probe.stderr.strip().splitlines()[-1][:90]}"


ENOSPC = api("""
    import errno, os
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    os.replace = full
    from herdsim.cli.app import main
    sys.argv = ["herdsim", *sys.argv[1:]]
    main()
""")

GLYPH = TINY.replace("name: tiny", 'name: "herd 🔥 漢字"')
NUMPY = """
    s = herdsim.load_scenario({"name": "n", "seed": np.int64(3), "duration": np.float64(1),
                               "workload": {"rate": np.float32(5)},
                               "workers": {"count": np.int32(2)},
                               "downstream": {"concurrency": np.int64(2)}})
    assert type(s.seed) is int and s.workers.count == 2
"""


def cases() -> list[Case]:
    from hostile_cases_124 import more

    digits = "9" * 5000
    return more(Case, api, write, TINY) + [
        # 3: untrusted structure
        Case("3", "validate: a 3,000-service chain", "herdsim validate c.yaml", "refuse",
             "services", setup=write("c.yaml", chain(3000))),
        Case("3", "validate: a 3,000-service cycle", "herdsim validate c.yaml", "refuse",
             "services", setup=write("c.yaml", chain(3000, cycle=True))),
        Case("3", "run: a 3,000-service chain", "herdsim run c.yaml -q --out r", "refuse",
             "services", setup=write("c.yaml", chain(3000)), leftover="r"),
        Case("3", "API: a 3,000-service cycle as a dict", "API", "refuse", "services",
             setup=write("c.yaml", chain(3000, cycle=True)),
             script=api("import yaml; herdsim.load_scenario(yaml.safe_load("
                        "open('c.yaml').read()))")),
        Case("3", "validate: 99 services, 100 tiers deep", "herdsim validate c.yaml",
             "refuse", "services", setup=write("c.yaml", chain(99))),
        Case("3", "validate: a 99-service cycle", "herdsim validate c.yaml", "refuse",
             "services", setup=write("c.yaml", chain(99, cycle=True))),
        Case("3", "validate: 500 services side by side", "herdsim validate c.yaml",
             "refuse", "services", setup=write("c.yaml", fan(500))),
        Case("3", "report: a resealed folder holding a 3,000-service chain",
             "herdsim report r", "refuse", "services",
             setup=run_dir_with(chain(3000)), bound=120),
        Case("3", "compare: a 3,000-service chain", "herdsim compare c.yaml --strategies "
             "exponential -q --out o", "refuse", "services",
             setup=write("c.yaml", chain(3000)), leftover="o"),
        Case("3", "trace: a span of 0 to 1e15 s", "herdsim trace t.csv", "refuse", "t.csv",
             setup=trace_file("t.csv", ["0", "1", "1e15"])),
        Case("3", "trace: a span of 0 to 1e300 s", "herdsim trace t.csv", "refuse", "t.csv",
             setup=trace_file("t.csv", ["0", "1e300"])),
        Case("3", "trace: 1e12 s at 1 ms bins", "herdsim trace t.csv --bin 1ms", "refuse",
             "t.csv", setup=trace_file("t.csv", ["0", "1e12"])),
        Case("3", "trace: the file is a FIFO", "herdsim trace f.csv", "refuse", "f.csv",
             setup=fifo("f.csv"), bound=20),
        Case("3", "run: workload.trace.file is a FIFO", "herdsim run s.yaml -q --out r",
             "refuse", "f.csv", bound=20, leftover="r", setup=both(fifo("f.csv"), write(
                 "s.yaml", TINY.replace("workload: {rate: 10}", "workload: {arrivals: trace, "
                                        "trace: {file: f.csv}}")))),
        Case("3", "trace --profile into a FIFO's place", "herdsim trace t.csv --profile f",
             "refuse", "f", setup=both(fifo("f"), trace_file("t.csv", ["0", "1"])),
             bound=20),
        Case("3", "sweep: a Dask scheduler that accepts and never answers",
             "herdsim sweep tiny.yaml --grid workers.count=2,3 --scheduler "
             "tcp://127.0.0.1:PEER --out sw -q", "refuse", "--scheduler",
             setup=write("tiny.yaml", TINY), bound=60, leftover="sw"),
        Case("3", "API: sweep on a scheduler that never answers", "API", "refuse",
             "scheduler", setup=write("tiny.yaml", TINY), bound=60,
             script=api("herdsim.sweep('tiny.yaml', ['workers.count=2,3'], "
                        "scheduler='tcp://127.0.0.1:PEER', out='sw')")),
        # 5: one normalisation path
        Case("5", "API: a scenario dict with numpy scalars", "API", "ok", script=api(NUMPY)),
        Case("5", "API: numpy scalars as overrides", "API", "ok",
             setup=write("tiny.yaml", TINY), script=api(
                 "s = herdsim.load_scenario('tiny.yaml', {'workers.count': np.int64(3), "
                 "'workload.rate': np.float64(4)}); assert s.workers.count == 3")),
        Case("5", "API: compare(replications=np.int64(1))", "API", "ok",
             setup=write("tiny.yaml", TINY), script=api(
                 "herdsim.compare('tiny.yaml', strategies='exponential', "
                 "replications=np.int64(1), processes=1, progress=False)")),
        Case("5", "API: sweep(replications=2.5)", "API", "refuse", "replications",
             setup=write("tiny.yaml", TINY),
             script=api("herdsim.sweep('tiny.yaml', replications=2.5, out='sw')"),
             leftover="sw"),
        Case("5", "API: sweep(scheduler=123)", "API", "refuse", "scheduler",
             setup=write("tiny.yaml", TINY),
             script=api("herdsim.sweep('tiny.yaml', scheduler=123, out='sw')"),
             leftover="sw"),
        Case("5", "API: sweep(grid=5)", "API", "refuse", "grid",
             setup=write("tiny.yaml", TINY),
             script=api("herdsim.sweep('tiny.yaml', grid=5, out='sw')"), leftover="sw"),
        Case("5", "API: sweep(progress='yes')", "API", "refuse", "progress",
             setup=write("tiny.yaml", TINY),
             script=api("herdsim.sweep('tiny.yaml', progress='yes', out='sw')"),
             leftover="sw"),
        Case("5", "API: a dict value of type object", "API", "refuse", "workload.rate",
             script=api("herdsim.load_scenario({'name': 'x', 'workload': "
                        "{'rate': object()}})")),
        Case("5", "YAML: a 5,000-digit seed", "herdsim validate s.yaml", "refuse", "seed",
             setup=write("s.yaml", TINY.replace("seed: 1", f"seed: {digits}"))),
        Case("5", "YAML: a 200-digit worker count", "herdsim validate s.yaml", "refuse",
             "workers.count", setup=write("s.yaml", TINY.replace("count: 2", "count: "
                                                                  + "9" * 200))),
        Case("5", "--set: a 5,000-digit value", f"herdsim validate tiny.yaml --set "
             f"workers.count={digits}", "refuse", "workers.count",
             setup=write("tiny.yaml", TINY)),
        Case("5", "API: a 5,000-digit seed in a dict", "API", "refuse", "seed",
             script=api("herdsim.load_scenario({'name': 'x', 'seed': 10 ** 5000})")),
        # 6: a trust model for resume
        Case("6", "resume: jobs_succeeded 1,000,000 of a handful", SWEEP, "ok", bound=300,
             setup=forged_sweep(lambda r: r.update(jobs_succeeded=1_000_000)),
             check=genuine_row),
        Case("6", "resume: another strategy and seed", SWEEP, "ok", bound=300,
             setup=forged_sweep(lambda r: r.update(strategy="full_jitter", seed=99)),
             check=genuine_row),
        Case("6", "resume: another seed only", SWEEP, "ok", bound=300,
             setup=forged_sweep(lambda r: r.update(seed=r["seed"] + 7)), check=genuine_row),
        Case("6", "resume: a million jobs, consistently", SWEEP, "ok", bound=300,
             setup=forged_sweep(inflate), check=genuine_row),
        Case("6", "resume: a succeeded fraction not its own", SWEEP, "ok", bound=300,
             setup=forged_sweep(lambda r: r.update(succeeded_fraction=0.0)),
             check=genuine_row),
        # 7: libraries talking to the user
        Case("7", "run -q of a scenario named with emoji and CJK", "herdsim run g.yaml -q "
             "--out r", "ok", setup=write("g.yaml", GLYPH), check=quiet_stderr),
        Case("7", "run of the same (not quiet): no raw library text", "herdsim run g.yaml "
             "--out r", "ok", setup=write("g.yaml", GLYPH), check=no_library_text),
        Case("7", "compare -q of the same", "herdsim compare g.yaml --strategies "
             "exponential,full_jitter -q --out o", "ok", setup=write("g.yaml", GLYPH),
             check=quiet_stderr, bound=120),
        Case("7", "plot of a glyph run: no raw library text", "herdsim plot r", "ok",
             check=no_library_text,
             setup=both(write("g.yaml", GLYPH), lambda folder: subprocess.run(
                 [sys.executable, "-m", "herdsim", "run", "g.yaml", "-q", "--out", "r",
                  "--format", "svg"], cwd=folder, env=os.environ | {"PYTHONPATH": TREE},
                 capture_output=True, timeout=120, check=True))),
        # 8: messages
        Case("8", "a full disk while saving a run", "API ENOSPC run tiny.yaml -q --out r",
             "refuse", "r/", setup=write("tiny.yaml", TINY), script=ENOSPC, leftover="r"),
        Case("8", "a full disk while saving a comparison", "API ENOSPC compare tiny.yaml "
             "--strategies exponential -q --out o", "refuse", "o/",
             setup=write("tiny.yaml", TINY), script=ENOSPC, leftover="o", bound=120),
        Case("8", "stdout's reader stops at once: kpis | head -c 0",
             "herdsim kpis | head -c 0; exit ${PIPESTATUS[0]}", "ok",
             check=quiet_stderr),
        Case("8", "stdout's reader stops at once: run --json | head -c 0",
             "herdsim run tiny.yaml --json -q --out r | head -c 0; exit ${PIPESTATUS[0]}",
             "ok", setup=write("tiny.yaml", TINY), check=silent_and_saved("r")),
        Case("8", "stdout's reader stops early: run (table) | head -1",
             "herdsim run tiny.yaml --out r 2>/dev/null | head -1 >/dev/null; "
             "exit ${PIPESTATUS[0]}", "ok", setup=write("tiny.yaml", TINY),
             check=lambda folder, _r: None if (folder / "r" / "summary.json").exists()
             else "r was not saved"),
        Case("8", "stdout closed (>&-): kpis", "herdsim kpis >&-", "ok", check=one_line),
        Case("8", "trace --profile of a 100,000 s trace at 1 s bins",
             "herdsim trace long.csv --profile p.yaml", "either", setup=long_trace,
             check=profile_readable, bound=120),
    ]


TREE = ""


def run_case(case: Case, peer_port: int) -> tuple[bool, str]:
    folder = Path(tempfile.mkdtemp(prefix="hostile-"))
    try:
        if case.setup:
            case.setup(folder)
        shell = case.shell.replace("PEER", str(peer_port))
        if shell.startswith("API"):
            argv = shell.split()[2:] if shell.startswith("API ENOSPC") else []
            script = case.script.replace("PEER", str(peer_port))
            command = [sys.executable, "-c", script, *argv]
        else:
            command = ["bash", "-c", shell.replace("herdsim ", f"{sys.executable} -m herdsim ",
                                                   1)]
        started = time.monotonic()
        process = subprocess.Popen(command, cwd=folder, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True,
                                   env=os.environ | {"PYTHONPATH": TREE, "COLUMNS": "200"})
        try:
            out, err = process.communicate(timeout=case.bound)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return False, f"hangs (killed after {case.bound:g} s)"
        took = time.monotonic() - started
        result = subprocess.CompletedProcess(command, process.returncode, out, err)
        if "Traceback" in err:
            last = [line for line in err.splitlines() if line.strip()][-1]
            return False, f"traceback, exit {result.returncode}: {last[:100]}"
        lines = [line for line in err.splitlines() if line.strip()]
        if case.expect == "refuse":
            if result.returncode != 2:
                return False, f"exit {result.returncode} (expected 2): {' | '.join(lines)[:100]}"
            if len(lines) != 1:
                return False, f"{len(lines)} lines on stderr: {' | '.join(lines)[:100]}"
            if case.word not in lines[0]:
                return False, f"does not name {case.word!r}: {lines[0][:100]}"
            if case.leftover and (folder / case.leftover).exists():
                return False, f"left {case.leftover} behind"
            return True, f"{took:.1f}s: {lines[0][:110]}"
        if case.expect == "ok" and result.returncode != 0:
            return False, f"exit {result.returncode}: {' | '.join(lines)[:100]}"
        problem = case.check(folder, result) if case.check else None
        return (problem is None), (problem or f"{took:.1f}s: exit {result.returncode}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    global TREE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", required=True, help="the checkout to test (PYTHONPATH)")
    parser.add_argument("--only", default="", help="classes to run, e.g. 3,5")
    args = parser.parse_args()
    TREE = str(Path(args.tree).resolve())
    only = set(filter(None, args.only.split(",")))
    peer, port = silent_peer()
    tally: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    try:
        for case in cases():
            if only and case.cls not in only:
                continue
            clean, note = run_case(case, port)
            total[case.cls] += 1
            tally[case.cls] += clean
            print(f"[{case.cls}] {'clean' if clean else 'BAD  '} {case.name}: {note}",
                  flush=True)
    finally:
        peer.kill()
        peer.wait()
    print(f"\n{TREE}")
    for cls in sorted(total):
        print(f"class {cls}: {tally[cls]} clean of {total[cls]}")
    print(f"all: {sum(tally.values())} clean of {sum(total.values())}")


if __name__ == "__main__":
    main()
