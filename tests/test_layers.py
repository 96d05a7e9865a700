"""The package keeps its shape: the layers contract holds and no module imports itself back.

The contract lives in ``pyproject.toml`` ([tool.importlinter]); ``lint-imports`` checks it.
The cycle check walks every import grimp sees, those inside functions included.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def test_the_layers_contract_is_kept():
    command = shutil.which("lint-imports") or f"{Path(sys.executable).parent}/lint-imports"
    done = subprocess.run([command], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_module_is_part_of_an_import_cycle():
    graph = grimp.build_graph("herdsim", cache_dir=None)
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == 1:
                cycles.append(path[path.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, [*path, imported])
        state[module] = 2

    for module in modules:
        if module not in state:
            visit(module, [module])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_only_the_fluid_model_imports_numba():
    """numba costs ~0.4 s to import: a run of scenarios with a budget and a breaker (whose
    members also have compiled fluid rules) must not pay it; predict does."""
    probe = ("import sys, herdsim\n"
             "from herdsim.config.loading import load_scenario\n"
             f"for name in ('budget', 'breaker'):\n"
             f"    herdsim.run(load_scenario('{ROOT}/scenarios/' + name + '.yaml'))\n"
             "print('numba' in sys.modules)\n"
             f"herdsim.predict(load_scenario('{ROOT}/scenarios/budget.yaml'))\n"
             "print('numba' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert done.stdout.split() == ["False", "True"]
