"""Third-party libraries' warnings and log records, said through herdsim's own stderr.

matplotlib warns of each glyph its font lacks, pandas and numpy of what they deem odd,
Dask and others log: none of it reaches the user as a library's raw text with a source
line. While a command runs (:func:`routed`), each warning is one line, ``warning: ...``,
each text once, the glyphs a figure's font lacks gathered into one line at the end; log
records of WARNING and above likewise. Under ``-q`` only log records of ERROR and above
are said.
"""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font\(s\) (.+?)\.?$")


class _Voice(logging.Handler):
    """Library log records as one line each, each text once."""

    def __init__(self, say: Callable[[str], None], level: int):
        super().__init__(level)
        self.say = say
        self.said: set[str] = set()
        self.glyphs: dict[str, str] = {}  # the character -> the font that lacks it

    def hear(self, text: str) -> None:
        first = (text.strip().splitlines() or [""])[0]
        glyph = GLYPH.match(first)
        if glyph:
            self.glyphs.setdefault(chr(int(glyph.group(1))), glyph.group(2))
        elif first and first not in self.said:
            self.said.add(first)
            self.say(first)

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a record that cannot be shown: not ours
            self.hear(f"{record.name}: {record.getMessage()}")

    def finish(self) -> None:
        if self.glyphs:
            fonts = ", ".join(sorted(set(self.glyphs.values())))
            self.say(f"figures: the font ({fonts}) has no glyph for "
                     f"{', '.join(self.glyphs)}; drawn as boxes")


@contextlib.contextmanager
def routed(say: Callable[[str], None], quiet: bool) -> Iterator[None]:
    """Within the block, library warnings and log records go to *say* as one line each
    (see the module); *quiet*: warnings and log records below ERROR are dropped."""
    voice = _Voice(say, logging.ERROR if quiet else logging.WARNING)
    root = logging.getLogger()
    saved = (warnings.showwarning, root.handlers[:], root.level,
             logging.lastResort)

    def show(message: Any, category: type[Warning], *_args: Any, **_kwargs: Any) -> None:
        if not quiet:
            voice.hear(str(message))

    warnings.showwarning = show
    root.handlers[:] = [voice]
    root.setLevel(voice.level)
    logging.lastResort = None  # type: ignore[assignment]  # records without a handler
    try:
        yield
    finally:
        warnings.showwarning, root.handlers[:], level, logging.lastResort = saved
        root.setLevel(level)
        if not quiet:
            voice.finish()
