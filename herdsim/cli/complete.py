"""Shell completion of the command line's names: bundled scenarios (and YAML files),
strategies, presets, experiments and KPIs; a comma-separated list completes its last item."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from herdsim.config import bundled


def scenarios(incomplete: str) -> list[str]:
    """Bundled scenario names, then ``*.yaml`` files, that start with *incomplete*."""
    names = [name for name in bundled.names() if name.startswith(incomplete)]
    folder = Path(incomplete).parent
    try:
        files = sorted(str(path) for path in folder.glob(f"{Path(incomplete).name}*")
                       if path.suffix in (".yaml", ".yml") or path.is_dir())
    except OSError:
        files = []
    return names + [f for f in files if f.startswith(incomplete)]


def listing(values: Callable[[], list[str]]) -> Callable[[str], list[str]]:
    """Completion of ``a,b,c``: the last item among *values()*, the earlier ones kept."""
    def complete(incomplete: str) -> list[str]:
        done, comma, last = incomplete.rpartition(",")
        return [f"{done}{comma}{value}" for value in values() if value.startswith(last)]
    return complete


def _strategies() -> list[str]:
    from herdsim.policies.backoff import registry

    return list(registry.available())


def _presets() -> list[str]:
    from herdsim.policies import presets

    return list(presets.PRESETS)


def _experiments() -> list[str]:
    from herdsim.experiments.reproduce import EXPERIMENTS

    return list(EXPERIMENTS)


def kpis(incomplete: str) -> list[str]:
    """The KPI registry's keys that start with *incomplete* (``herdsim kpis``)."""
    from herdsim.analysis.kpis import BY_KEY

    return [key for key in BY_KEY if key.startswith(incomplete)]


strategies = listing(_strategies)
presets = listing(_presets)
experiments = listing(_experiments)
