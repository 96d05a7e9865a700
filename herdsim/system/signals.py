"""Signals that end a save end it like Ctrl-C: SIGTERM (a kill, a CI timeout) and SIGHUP
(a closed terminal) raise :class:`Interrupted`, a ``KeyboardInterrupt``, so the staging
of :mod:`herdsim.outputs.atomic` is removed on the way out and nothing half-written stays.

Only a signal still at its default action is taken over (a program that set its own
handler keeps it), only in the main thread, and only while the block runs.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

ENDING = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
               if s is not None)


class Interrupted(KeyboardInterrupt):
    """A SIGTERM or SIGHUP received while herdsim was working; ``signum`` says which."""

    def __init__(self, signum: int | str):
        # rebuilt from its args (its name) when it crosses a process or SimPy's re-raise
        which = signal.Signals[signum] if isinstance(signum, str) else signal.Signals(signum)
        super().__init__(which.name)
        self.signum = int(which)


def _raise(signum: int, frame: object) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Interrupted` (see the module)."""
    taken = {}
    if threading.current_thread() is threading.main_thread():
        for signum in ENDING:
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                taken[signum] = signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, previous in taken.items():
            signal.signal(signum, previous)
