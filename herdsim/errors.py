"""Every error a user's mistake raises, under one base, :class:`HerdsimError`.

``str()`` of any of them is the message the CLI prints (one line per problem, each naming
the file, the field and the problem); the CLI turns them into exit code 2 in one place (1
for a :class:`TaskError` whose cause is a bug: its ``exit_code``).
"""

from __future__ import annotations


class HerdsimError(Exception):
    """Base of every herdsim error meant for the user rather than a traceback."""


class ScenarioError(HerdsimError):
    """A scenario (or an override of it) is invalid.

    ``problems`` holds ``(field, message)`` pairs; ``str()`` gives one line per problem,
    each naming the source file and the dotted field path.
    """

    def __init__(self, problems: list[tuple[str, str]], source: str | None = None):
        self.problems = problems
        self.source = source
        super().__init__(str(self))

    def __reduce__(self):  # picklable across worker processes
        return (ScenarioError, (self.problems, self.source))

    def __str__(self) -> str:
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(
            f"{prefix}{field}: {message}" if field else f"{prefix}{message}"
            for field, message in self.problems
        )


class UsageError(HerdsimError):
    """A mistake on the command line or in an API call's arguments (not in a scenario)."""


class OutputDirError(HerdsimError):
    """A directory that holds no herdsim output of the expected kind, or a damaged one."""


class OutputExistsError(OutputDirError, FileExistsError):
    """An output directory or file that already exists: outputs are never overwritten."""


class SweepError(HerdsimError):
    """A sweep that cannot run as asked: bad grid, invalid cell, a mismatched directory."""


class ExecutorError(HerdsimError):
    """Runs cannot be sent where asked (a Dask scheduler that does not answer)."""


class TaskError(HerdsimError):
    """One run of a comparison, sweep or reproduction (an arm's replication, a sweep's task)
    raised; every other run was stopped. ``str()`` is one line: the run, then the cause.

    ``user`` is True when the cause is the user's input (a herdsim error, e.g. a strategy
    that raised: ``exit_code`` 2), False for a bug (``exit_code`` 1, and the message says
    where it was raised); ``cause`` names the exception's class and ``traceback`` holds
    its traceback as text.
    """

    def __init__(self, run: str, cause: str, message: str, user: bool, where: str = "",
                 traceback: str = ""):
        self.run, self.cause, self.message, self.user = run, cause, message, user
        self.where, self.traceback = where, traceback
        super().__init__(str(self))

    @property
    def exit_code(self) -> int:
        """The CLI's exit code: 2 for the user's input, 1 for a bug."""
        return 2 if self.user else 1

    def __str__(self) -> str:
        text = "; ".join(line.strip() for line in self.message.splitlines() if line.strip())
        if self.user:
            return f"{self.run}: {text or self.cause}"
        said = f"{self.cause}: {text}" if text else self.cause
        at = f", raised at {self.where}" if self.where else ""
        return f"{self.run}: {said} (a bug{at})"


class PrometheusError(HerdsimError):
    """Prometheus or promtool cannot be found, started or reached."""


class StrategyError(HerdsimError):
    """A user's strategy failed: it raised, or returned a sleep that is not a finite
    number >= 0. The message names the strategy, the attempt and the value."""


class CapacityError(HerdsimError):
    """A run this machine cannot hold (the estimate is in the message); ``force`` runs it."""


class FigureError(OutputDirError):
    """The data of a run was written, but a figure of it could not be drawn."""


class TestbedError(HerdsimError):
    """The testbed cannot run as asked: ``redis-server`` missing, a scenario feature it does
    not emulate, or one of its processes failed (the message names which and why)."""

    __test__ = False  # not a pytest test class, despite its name
