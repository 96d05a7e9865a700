"""The one way herdsim reads a file it is given: a regular file only, of bounded size.

A FIFO, a terminal, ``/dev/zero`` or a directory where a file belongs is refused at
once (reading one would hang or exhaust memory), and so is a file larger than the
bound its kind allows.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

SCENARIO_LIMIT = 1 << 20  # a scenario file: 1 MiB is thousands of times a real one
OUTPUT_LIMIT = 1 << 34    # a file herdsim wrote: 16 GiB (a long run's sleeps.csv is large)


class NotRegularFile(OSError):
    """*path* is not a regular file, or is larger than allowed (``strerror`` says which)."""


def open_regular(path: str | Path, limit: int = OUTPUT_LIMIT) -> int:
    """A read-only descriptor of *path*, refusing anything but a regular file of at most
    *limit* bytes (opened without blocking, so a FIFO with no writer cannot hang)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(21, "a directory, not a file", str(path))
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(22, "not a regular file (a FIFO, device or socket)",
                                 str(path))
        if info.st_size > limit:
            raise NotRegularFile(27, f"larger than {limit:,} bytes", str(path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_bytes(path: str | Path, limit: int = OUTPUT_LIMIT) -> bytes:
    """The bytes of the regular file *path* (see :func:`open_regular`)."""
    with os.fdopen(open_regular(path, limit), "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:  # grew while read
        raise NotRegularFile(27, f"larger than {limit:,} bytes", str(path))
    return data
