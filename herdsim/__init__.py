"""herdsim: a discrete-event simulator of retry storms (the thundering herd).

The Python API: :func:`load_scenario`, :func:`run` (a :class:`Result`), :func:`predict`
(a :class:`Prediction`: the fluid model), :func:`boundary` (where recovering stops: a
:class:`Boundary`, or for two settings a :class:`Curve`), :func:`compare`
(a :class:`Comparison`), :func:`sweep` (a grid of settings, its classes and map), and
:func:`save` to write a run or a comparison as an output directory.

Each name is imported on first use, so ``import herdsim`` (and the command line's
``--help``) does not pay for pandas and matplotlib until a run needs them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

#: Public name -> the module that defines it.
_WHERE = {
    "Boundary": "herdsim.experiments.boundary",
    "Comparison": "herdsim.results.comparison",
    "Curve": "herdsim.experiments.boundary",
    "HerdsimError": "herdsim.errors",
    "Result": "herdsim.results.result",
    "Scenario": "herdsim.config.scenario",
    "ScenarioError": "herdsim.errors",
    "Strategy": "herdsim.policies.backoff",
    "boundary": "herdsim.experiments.boundary",
    "compare": "herdsim.experiments.compare",
    "load_scenario": "herdsim.config.loading",
    "predict": "herdsim.results.predicted",
    "Prediction": "herdsim.results.predicted",
    "run": "herdsim.results.result",
    "save": "herdsim.outputs.compare_dir",
    "sweep": "herdsim.experiments.sweep",
}

__all__ = ["Boundary", "Comparison", "Curve", "HerdsimError", "Prediction", "Result",
           "Scenario", "ScenarioError", "Strategy", "boundary", "compare", "load_scenario",
           "predict", "run", "save", "sweep"]


def _version() -> str:
    """The installed distribution's version (read on first use: ``importlib.metadata``
    costs a command tens of milliseconds)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("herdsim")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str):
    if name == "__version__":
        globals()[name] = value = _version()
        return value
    if name not in _WHERE:
        raise AttributeError(f"module 'herdsim' has no attribute {name!r}")
    value = getattr(import_module(_WHERE[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE) | {"__version__"})


if TYPE_CHECKING:
    from herdsim.config.loading import load_scenario
    from herdsim.config.scenario import Scenario
    from herdsim.errors import HerdsimError, ScenarioError
    from herdsim.experiments.boundary import Boundary, Curve, boundary
    from herdsim.experiments.compare import compare
    from herdsim.experiments.sweep import sweep
    from herdsim.outputs.compare_dir import save
    from herdsim.policies.backoff import Strategy
    from herdsim.results.comparison import Comparison
    from herdsim.results.predicted import Prediction, predict
    from herdsim.results.result import Result, run
