"""herdsim: a discrete-event simulator of retry storms (the thundering herd)."""

from .compare import Comparison, compare
from .errors import ScenarioError
from .result import Result
from .scenario import Scenario, load_scenario
from .simulation import run
from .strategies import Strategy

__all__ = ["Comparison", "Result", "Scenario", "ScenarioError", "Strategy", "compare",
           "load_scenario", "run"]
__version__ = "0.1.0"
