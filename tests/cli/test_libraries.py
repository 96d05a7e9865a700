"""Libraries' warnings and log records are said through herdsim's stderr, one line each,
each text once, nothing below ERROR under -q; what was there before is put back."""

from __future__ import annotations

import logging
import warnings

from herdsim.cli.libraries import routed


def test_warnings_and_records_are_one_line_each_once():
    said: list[str] = []
    before = (warnings.showwarning, logging.getLogger().handlers[:])
    with routed(said.append, quiet=False):
        for _ in range(3):
            warnings.warn("pandas thinks\\nsomething", UserWarning, stacklevel=1)
            logging.getLogger("lib.part").warning("a record\nwith a second line")
        logging.getLogger("lib.part").info("below the bar")
        warnings.warn("Glyph 128293 (\\N{FIRE}) missing from font(s) DejaVu Sans.",
                      UserWarning, stacklevel=1)
        warnings.warn("Glyph 28450 (\\N{CJK UNIFIED IDEOGRAPH-6F22}) missing from font(s) "
                      "DejaVu Sans.", UserWarning, stacklevel=1)
    assert said == ["pandas thinks\\nsomething", "lib.part: a record",
                    "figures: the font (DejaVu Sans) has no glyph for 🔥, 漢; drawn as boxes"]
    assert (warnings.showwarning, logging.getLogger().handlers) == before


def test_quiet_says_only_errors():
    said: list[str] = []
    with routed(said.append, quiet=True):
        warnings.warn("Glyph 128293 (\\N{FIRE}) missing from font(s) DejaVu Sans.",
                      UserWarning, stacklevel=1)
        logging.getLogger("lib").warning("a warning")
        logging.getLogger("lib").error("an error")
    assert said == ["lib: an error"]
