"""Output directories that appear whole or not at all."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_dir(out: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory that becomes *out* only if the block succeeds.

    Refuses an *out* that already exists: outputs are never overwritten silently.
    """
    out = Path(out)
    if out.exists():
        raise FileExistsError(f"{out}: already exists; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    try:
        yield holder / out.name
        (holder / out.name).rename(out)
    finally:
        shutil.rmtree(holder, ignore_errors=True)
