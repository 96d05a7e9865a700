"""Outputs that appear whole or not at all, and never land outside their folder.

Every write goes through here: :func:`staged_dir` for a new directory, :func:`write_file`
for one file, :func:`staging_dir` for a scratch folder beside the outputs. Each stages
under a hidden name that carries the writer's pid (``.herdsim-<pid>-...``), then renames
it into place; a save ended by a signal (see :mod:`herdsim.system.signals`) removes its
staging, and one ended by SIGKILL leaves it for the next writer in that folder to clear
(:func:`clear_stale`: the owner's pid is gone). A target is never reached through a
symbolic link that leads out of the folder written into.

Every directory written through :func:`staged_dir` carries ``checksums.json`` (the SHA-256
of each file as written); readers call :func:`verify` so a file truncated, edited or
replaced since is named rather than read as if herdsim had written it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from herdsim.errors import HerdsimError, OutputDirError, OutputExistsError
from herdsim.system.children import alive
from herdsim.system.signals import as_interrupt
from herdsim.system.timings import phase

CHECKSUMS = "checksums.json"
STAGING = ".herdsim-"  # the prefix of every staging folder and file: .herdsim-<pid>-...
_OWNER = re.compile(rf"^{re.escape(STAGING)}(\d+)-")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_cleared: set[str] = set()


def sha256(path: Path) -> str:
    """The SHA-256 of the regular file *path* (see :func:`~herdsim.config.files.open_regular`)."""
    from herdsim.config.files import open_regular

    digest = hashlib.sha256()
    with open(open_regular(path), "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def seal(directory: Path) -> None:
    """Write ``checksums.json``: the SHA-256 of every file now in *directory* (top level)."""
    sums = {path.name: sha256(path) for path in sorted(directory.iterdir())
            if path.is_file() and not path.is_symlink() and path.name != CHECKSUMS
            and not path.name.startswith(STAGING)}
    write_file(directory / CHECKSUMS, json.dumps(sums, indent=1) + "\n")


def checksums(directory: Path) -> dict[str, str] | None:
    """The sealed checksums of *directory*: None when it has none (written before
    checksums existed); :class:`OutputDirError` when ``checksums.json`` is not a mapping of
    file names to SHA-256 digests (``[]`` or ``{}`` would turn every check off)."""
    from herdsim.config.files import read_bytes

    listing = directory / CHECKSUMS
    if not os.path.lexists(listing):
        return None
    try:
        sums = json.loads(read_bytes(listing).decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise OutputDirError(f"{listing}: damaged (not JSON)") from None
    if not (isinstance(sums, dict) and sums and all(
            isinstance(name, str) and "/" not in name and isinstance(digest, str)
            and _SHA256.match(digest) for name, digest in sums.items())):
        raise OutputDirError(f"{listing}: damaged (expected an object mapping each file "
                             "name to its SHA-256)")
    return sums


def verify(directory: Path, name: str) -> None:
    """Raise :class:`OutputDirError` when *name* in *directory* differs from what the
    writer sealed, or when a sealed directory's ``checksums.json`` does not cover it
    (directories written before checksums existed are not checked)."""
    sums = checksums(directory)
    if sums is None:
        return
    path = directory / name
    expected = sums.get(name)
    if expected is None:
        if not os.path.lexists(path):
            raise OutputDirError(f"{directory}: {name} is missing")
        raise OutputDirError(f"{path}: not covered by {CHECKSUMS} (added or renamed since "
                             "herdsim wrote the directory)")
    if path.is_symlink() or not path.is_file():
        what = "missing" if not os.path.lexists(path) else "not a regular file"
        raise OutputDirError(f"{directory}: {name} is {what}")
    if sha256(path) != expected:
        raise OutputDirError(f"{path}: changed, truncated or replaced since herdsim wrote it "
                             f"(its checksum differs from {CHECKSUMS})")


def sealed(directory: Path, name: str) -> bool:
    """True when *name* is in *directory* exactly as its writer sealed it."""
    try:
        sums = checksums(directory)
        verify(directory, name)
    except (OutputDirError, OSError):
        return False
    return sums is not None and name in sums


def clear_stale(folder: Path) -> list[Path]:
    """Delete the staging folders and files in *folder* whose writer process is gone (a
    save ended by SIGKILL or a power cut); once per folder and process."""
    key = os.path.realpath(folder)
    if key in _cleared:
        return []
    _cleared.add(key)
    cleared = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            owner = _OWNER.match(entry.name)
            if owner is None or alive(int(owner.group(1))):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
            cleared.append(Path(entry.path))
    return cleared


def _prefix(name: str) -> str:
    return f"{STAGING}{os.getpid()}-{name.encode()[:60].decode(errors='ignore')}-"


def inside(root: Path, path: Path) -> Path:
    """*path*'s folder, refusing one reached through a symbolic link that leads out of
    *root* (a planted link must not carry a write elsewhere)."""
    folder = path.parent
    real_root, real_folder = os.path.realpath(root), os.path.realpath(folder)
    if os.path.commonpath([real_root, real_folder]) != real_root:
        raise OutputDirError(f"{folder}: a symbolic link leads out of {root} (to "
                             f"{real_folder}); herdsim does not write through it")
    return folder


@contextlib.contextmanager
def staging_dir(folder: Path, name: str) -> Iterator[Path]:
    """A scratch folder in *folder* (named for *name*), removed when the block ends however
    it ends; one left by a killed process is cleared by the next writer there."""
    folder.mkdir(parents=True, exist_ok=True)
    clear_stale(folder)
    with as_interrupt():
        holder = Path(tempfile.mkdtemp(prefix=_prefix(name), dir=folder))
        try:
            yield holder
        finally:
            shutil.rmtree(holder, ignore_errors=True)


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
    with staging_dir(out.parent, out.name) as holder, named(out, holder / out.name):
        yield holder / out.name
        with phase(f"save {CHECKSUMS}, publish the directory"):
            seal(holder / out.name)
            _commit(holder / out.name, out)


def _commit(staging: Path, out: Path) -> None:
    if claim(staging, out):
        return
    for n in range(1, 1000):
        beside = out.with_name(f"{out.name}.{n}")
        if claim(staging, beside):
            raise OutputExistsError(f"{out}: appeared while this run was working (another "
                                    f"run into the same --out?); this run's outputs are in "
                                    f"{beside}")
    raise OutputExistsError(f"{out}: already exists; choose another --out or remove it")


def claim(staging: Path, target: Path) -> bool:
    """Rename *staging* to *target* unless something (even an empty directory) is there:
    the one way a staged directory is published."""
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


@contextlib.contextmanager
def named(path: Path, staging: Path | None = None) -> Iterator[None]:
    """An ``OSError`` that names no file (a full disk: ``ENOSPC`` on a write) names
    *path*, the output being written, and one naming a file in *staging* (the hidden
    folder that becomes *path*) names it under *path*, so the message says where."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, HerdsimError):  # herdsim's own: it names what it means
            raise
        where = None if exc.filename is None else os.fsdecode(exc.filename)
        if where is not None and staging is not None and Path(where).is_relative_to(staging):
            where = str(path / Path(where).relative_to(staging))
        elif where is not None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc) or type(exc).__name__,
                      where or str(path)) from exc


NEW_FILE = 0o666  # the mode open() asks for a new file, before the umask


def _umask() -> int:
    """The process's umask (read by setting it and putting it back at once)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def write_file(path: Path, content: Any, writer=None, root: Path | None = None) -> None:
    """Write *content* (text, or through ``writer(content, path)``) to a staging file in
    the same folder, then rename it into place: readers never see half a file, and a link
    at *path* is replaced, never followed. *root* (default: *path*'s folder) is the folder
    the write must stay in (see :func:`inside`)."""
    folder = inside(path.parent if root is None else root, path)
    clear_stale(folder)
    with as_interrupt(), named(path):
        handle, name = tempfile.mkstemp(prefix=_prefix(path.name), suffix=path.suffix,
                                        dir=folder)
        temporary = Path(name)
        try:
            os.fchmod(handle, NEW_FILE & ~_umask())  # mkstemp's 0600 ignores the umask
            if writer is None:
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    stream.write(content)
            else:
                os.close(handle)
                writer(content, temporary)
            os.replace(temporary, path)
        finally:
            temporary.unlink(missing_ok=True)
