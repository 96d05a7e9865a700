"""Outputs that appear whole or not at all: directories and single files.

Every directory written through :func:`staged_dir` carries ``checksums.json`` (the SHA-256
of each file as written); readers call :func:`verify` so a file truncated, edited or
replaced since is named rather than read as if herdsim had written it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from herdsim.errors import OutputDirError, OutputExistsError

CHECKSUMS = "checksums.json"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seal(directory: Path) -> None:
    """Write ``checksums.json``: the SHA-256 of every file now in *directory* (top level)."""
    sums = {path.name: sha256(path) for path in sorted(directory.iterdir())
            if path.is_file() and path.name != CHECKSUMS}
    (directory / CHECKSUMS).write_text(json.dumps(sums, indent=1) + "\n")


def verify(directory: Path, name: str) -> None:
    """Raise :class:`OutputDirError` when *name* in *directory* differs from what the
    writer sealed (directories written before checksums existed are not checked)."""
    listing = directory / CHECKSUMS
    if not listing.is_file():
        return
    try:
        sums = json.loads(listing.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise OutputDirError(f"{listing}: damaged (not JSON)") from None
    expected = sums.get(name) if isinstance(sums, dict) else None
    if expected is None:
        return
    path = directory / name
    if not path.is_file():
        raise OutputDirError(f"{directory}: {name} is missing")
    if sha256(path) != expected:
        raise OutputDirError(f"{path}: changed, truncated or replaced since herdsim wrote it "
                             f"(its checksum differs from {CHECKSUMS})")


def sealed(directory: Path, name: str) -> bool:
    """True when *name* is in *directory* exactly as its writer sealed it."""
    try:
        verify(directory, name)
        sums = json.loads((directory / CHECKSUMS).read_text(encoding="utf-8"))
    except (OutputDirError, OSError, ValueError):
        return False
    return isinstance(sums, dict) and name in sums


@contextlib.contextmanager
def staged_dir(out: str | Path) -> Iterator[Path]:
    """Yield an empty staging directory that becomes *out* only if the block succeeds.

    Refuses an *out* that already exists: outputs are never overwritten silently. When
    *out* appears while the block runs (two runs into one ``--out``), the finished work
    is kept beside it, under the first free ``<out>.N``, and the error says where.
    """
    out = Path(out)
    if os.path.lexists(out):
        raise OutputExistsError(f"{out}: already exists; choose another --out or remove it")
    out.parent.mkdir(parents=True, exist_ok=True)
    holder = Path(tempfile.mkdtemp(prefix=f".{out.name[:64]}-", dir=out.parent))
    try:
        yield holder / out.name
        seal(holder / out.name)
        _commit(holder / out.name, out)
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def _commit(staging: Path, out: Path) -> None:
    if _claim(staging, out):
        return
    for n in range(1, 1000):
        beside = out.with_name(f"{out.name}.{n}")
        if _claim(staging, beside):
            raise OutputExistsError(f"{out}: appeared while this run was working (another "
                                    f"run into the same --out?); this run's outputs are in "
                                    f"{beside}")
    raise OutputExistsError(f"{out}: already exists; choose another --out or remove it")


def _claim(staging: Path, target: Path) -> bool:
    """Rename *staging* to *target* unless something (even an empty directory) is there."""
    try:
        target.mkdir()  # atomic: fails if anything exists at target
    except FileExistsError:
        return False
    target.rmdir()
    try:
        staging.rename(target)
    except OSError:
        return False
    return True


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
