"""What the general worker loop (:func:`herdsim.model.worker.make_run_job`) can be built
with beside its plain steps: the late answers of :mod:`herdsim.model.late`, described
here as a protocol so the loop needs no import of the module that builds on it."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, Protocol

from herdsim.policies.attempt import RetryStep


class LateHook(Protocol):
    """A job's late answers: its retry step, who a call is for, a sleep an answer can cut
    short, and the jobs whose answer came (:class:`herdsim.model.late.LateAnswers`)."""

    retry: RetryStep
    answered: set[Any]

    def caller(self, job: Any, proc: Any) -> Any: ...

    def sleep(self, job: Any, proc: Any, pause: float) -> Generator[Any, Any, bool]: ...
