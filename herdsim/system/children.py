"""The one way herdsim owns child processes: they die with the process that started them.

Pool workers (:mod:`herdsim.experiments.parallel`) call :func:`die_with_parent` in their
initializer and Prometheus (:mod:`herdsim.outputs.prometheus_server`) in its
``preexec_fn``: on Linux a parent-death signal (``prctl(PR_SET_PDEATHSIG)``) reaches them
even when the driver is killed with SIGKILL, so nothing is left running, deadlocked on a
queue nobody reads or listening on a port.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask Linux to send *signum* to this process when its parent dies; elsewhere a no-op.
    Safe in a ``preexec_fn`` and a pool initializer."""
    if _LIBC is None:
        return
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        _LIBC.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the signal was armed
        os.kill(os.getpid(), signum)


def alive(pid: int) -> bool:
    """True when a process *pid* exists (it may belong to someone else)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
