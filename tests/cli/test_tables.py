"""The run command's per-tier table (``herdsim.cli.tables.tier_table``): a column only
where some tier has the KPI, and the headline tier's mark on its name's line."""

from __future__ import annotations

from rich.console import Console

from herdsim.cli.tables import tier_table


def _text(table, width: int = 100) -> str:
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text()


def _tier(**extra) -> dict:
    return {"state": "recovered", "calls": 1000, "succeeded_calls": 990, "failed_calls": 10,
            "wasted_calls": 0, "collapses": 0, "peak_to_capacity": 1.5,
            "amplification": 1.2, "recovery_time": 2.0, **extra}


def test_a_cache_column_only_when_a_tier_has_a_cache_and_the_mark_stays_on_its_line():
    summary = {"headline_tier": "downstream", "tiers": {"downstream": _tier(), "db": _tier()}}
    text = _text(tier_table(summary))
    assert "cache" not in text  # no tier has one: no column of n/a
    assert any(line.strip("│ ").startswith("downstream *") for line in text.splitlines())
    cached = {**summary, "tiers": {"downstream": _tier(),
                                   "db": _tier(cache_hit_rate=0.8, cache_hit_rate_tail=0.9)}}
    text = _text(tier_table(cached), width=160)
    assert "cache hit rate" in text
    db = next(line for line in text.splitlines() if line.strip("│ ").startswith("db"))
    assert "0.8" in db and "0.9" in db


def test_a_narrow_terminal_drops_the_last_columns_and_names_them_never_cutting_a_word():
    """Thirteen tier columns in 80 or 120 characters: a cut word read "recov…" and
    "succe…". Each column is printed whole or left out, and the caption names what was
    left out; at 200 every column is there."""
    summary = {"headline_tier": "db", "tiers": {
        "api": _tier(), "db": _tier(cache_hit_rate=0.76, cache_hit_rate_tail=0.79,
                                    degradation_peak=1.06)}}
    for width in (80, 120):
        text = _text(tier_table(summary, width), width=width)
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width
        assert "recovered" in text and "not shown for width:" in text
        assert "degradation factor" in text.replace("\n", " ")  # named, if not shown
    wide = _text(tier_table(summary, 200), width=200)
    assert "not shown for width" not in wide and "1.06" in wide
