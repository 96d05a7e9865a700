"""Outputs that appear whole or not at all: directories and single files."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from herdsim.errors import OutputExistsError


@contextlib.contextmanager
def staged_dir(out: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory that becomes *out* only if the block succeeds.

    Refuses an *out* that already exists: outputs are never overwritten silently.
    """
    out = Path(out)
    if out.exists():
        raise OutputExistsError(f"{out}: already exists; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        yield holder / out.name
        (holder / out.name).rename(out)
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def write_file(path: Path, content: Any, writer=None) -> None:
    """Write *content* (text, or through ``writer(content, path)``) to a temporary file in
    the same directory, then rename it into place: readers never see half a file."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if writer is None:
            temporary.write_text(content, encoding="utf-8")
        else:
            writer(content, temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
