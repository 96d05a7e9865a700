"""The ``herdsim`` command line: a thin face over the Python API.

``app`` is the Typer application; each module adds its commands to it.
"""

from herdsim.cli import (
    boundary,
    compare,
    outputs,
    predict,
    presets,
    reproduce,
    run,
    schema,
    sweep,
    testbed,
    trace,
)
from herdsim.cli.app import app, main

__all__ = ["app", "boundary", "compare", "main", "outputs", "predict", "presets", "reproduce",
           "run", "schema", "sweep", "testbed", "trace"]
