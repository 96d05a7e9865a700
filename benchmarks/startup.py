"""How fast the command line answers, and what importing herdsim costs.

    python benchmarks/startup.py [--repeat 5]

Runs ``herdsim --version``, ``--help``, ``-h``, ``run -h`` and a shell-completion request
as a user's shell would (a fresh process each time, the ``herdsim`` next to this Python),
and prints the best and median wall time of each; then the peak memory (max RSS) of
``import herdsim`` alone and of the modules a run needs. A timing test would be flaky under
``pytest -n 2``; this script is the measurement.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS = {
    "--version": ["--version"],
    "--help": ["--help"],
    "-h": ["-h"],
    "run -h": ["run", "-h"],
    "completion": [],
}
COMPLETION_ENV = {"_HERDSIM_COMPLETE": "complete_bash", "COMP_WORDS": "herdsim ru",
                  "COMP_CWORD": "1"}
IMPORTS = {
    "python alone": "pass",
    "import herdsim": "import herdsim",
    "herdsim.cli (help)": "import herdsim.cli",
    "a run's modules": "import herdsim; herdsim.run; herdsim.compare; herdsim.save",
}


def executable() -> str:
    beside = Path(sys.executable).with_name("herdsim")
    found = str(beside) if beside.exists() else shutil.which("herdsim")
    if not found:
        sys.exit("no herdsim executable: pip install -e . first")
    return found


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False)
    return time.perf_counter() - start


def peak_rss_mib(code: str) -> float:
    probe = (f"{code}\nimport resource\n"
             "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return int(out.stdout.split()[-1]) / 1024  # Linux reports KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    herdsim = executable()
    print(f"{herdsim}, best and median of {args.repeat} fresh processes")
    for label, argv in COMMANDS.items():
        env = dict(os.environ, **(COMPLETION_ENV if label == "completion" else {}))
        times = [wall([herdsim, *argv], env) for _ in range(args.repeat)]
        print(f"  herdsim {label:<12} best {min(times):.3f} s  median "
              f"{statistics.median(times):.3f} s")
    print("peak memory (max RSS) of a fresh interpreter that imports:")
    for label, code in IMPORTS.items():
        print(f"  {label:<20} {peak_rss_mib(code):7.1f} MiB")


if __name__ == "__main__":
    main()
