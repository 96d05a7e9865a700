"""The garbage collector in a process that runs one command and ends.

Imports make hundreds of thousands of objects and no garbage, yet each of them triggers
collections that scan everything made so far; and the interpreter's teardown scans every
object still alive, several times, before freeing memory the operating system takes back
anyway. Neither changes what a command computes: these only skip the scans.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
from collections.abc import Iterator

_frozen_at_exit = False


@contextlib.contextmanager
def importing() -> Iterator[None]:
    """No collection while the block imports modules; what they made is then frozen
    (:func:`gc.freeze`: modules live as long as the process, no collection need scan them
    again), and the collector is as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def freeze_at_exit() -> None:
    """At interpreter exit, before its teardown, move every object out of the collector's
    sight (:func:`gc.freeze`); atexit handlers still run, objects are still freed by their
    reference counts. Once per process."""
    global _frozen_at_exit
    if not _frozen_at_exit:
        atexit.register(gc.freeze)
        _frozen_at_exit = True
