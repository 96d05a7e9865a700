"""herdsim: a discrete-event simulator of retry storms (the thundering herd).

The Python API: :func:`load_scenario`, :func:`run` (a :class:`Result`), :func:`compare`
(a :class:`Comparison`), and :func:`save` to write either as an output directory.
"""

from importlib.metadata import PackageNotFoundError, version

from herdsim.config.scenario import Scenario, load_scenario
from herdsim.errors import HerdsimError, ScenarioError
from herdsim.experiments.compare import compare
from herdsim.outputs.compare_dir import save
from herdsim.policies.strategies import Strategy
from herdsim.results.comparison import Comparison
from herdsim.results.result import Result, run

try:
    __version__ = version("herdsim")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["Comparison", "HerdsimError", "Result", "Scenario", "ScenarioError", "Strategy",
           "compare", "load_scenario", "run", "save"]
