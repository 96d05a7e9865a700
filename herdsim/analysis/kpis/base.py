"""One KPI as an object: what it is (key, label, unit, kind, better direction, meaning),
how it computes itself from a run, and how every surface presents it (its panels, its
bounds, its text when undefined). Tables, figures, the report, the verdict and the gate ask
the object; none of them matches on a key."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from herdsim.policies.durations import format_duration

Kind = Literal["count", "real", "fraction", "flag", "text"]
Better = Literal["higher", "lower", None]
Across = Literal["mean", "majority", "mode", "any", None]
Need = Literal["outage", "capacity"]
NA = "n/a"
SURFACES = ("run", "compare", "report", "figure", "verdict", "rank")  # where a KPI is used


@dataclass(frozen=True)
class Panel:
    """Where one surface shows a KPI: its place among the surface's KPIs (lower first) and
    the surface's own words for it. ``heading``: the ranked table's column heading, the
    figure's panel title, or the verdict's sentence (``{n}`` the count, ``{kind}`` the
    admission limiter); ``axis``: the figure's axis label; ``group``: the report's table;
    ``reference``: a line the figure draws at that value (capacity: 1×); ``nonzero``: shown
    only when some arm's value is nonzero; ``wide``: only where there is room (not in a
    terminal)."""

    order: float  # (a KPI added between two takes a place between their orders)
    heading: str = ""
    axis: str = ""
    group: str = ""
    reference: float | None = None
    nonzero: bool = False
    wide: bool = False


@dataclass(frozen=True)
class KPI:
    """One summary number. ``kind`` says how to show it (count: a whole number; fraction:
    a percentage; flag: yes/no), ``better`` which way is good (None: it ranks nothing),
    ``missing`` what an undefined value means (shown after "n/a"), ``optional`` that the
    run table shows it only when nonzero.

    ``compute(run)`` is its value from a run's frames (:class:`~.frames.Run`; a tier KPI's
    from one tier, :class:`herdsim.analysis.tiers.Tier`); None when another part supplies
    it (the model's extras, a call graph's headline, the testbed).
    ``present(run)``: whether the run has it at all (a defence's counter only with it).
    ``upper``: the key of its upper bound (a latency quantile with pending jobs);
    ``needs``: what it is undefined without (an outage, a bounded capacity); ``unreached``:
    the short word for an undefined value that means "did not happen within the run"
    (counted as +inf by the gate, shown in red); ``classes``: the words its text takes;
    ``headline``: a call graph's headline tier supplies it; ``across``: how replications
    combine (mean, the majority class, the most common, any; None: the run's identity);
    ``legacy``: its column computed for directories saved before it existed;
    ``details``: what the report's glossary adds to its meaning; ``panels``: surface ->
    :class:`Panel` (see :data:`SURFACES`)."""

    key: str
    label: str
    unit: str = ""
    kind: Kind = "real"
    better: Better = None
    meaning: str = ""
    optional: bool = False
    missing: str = ""
    compute: Callable[[Any], Any] | None = field(default=None, repr=False)
    present: Callable[[Any], bool] | None = field(default=None, repr=False)
    upper: str = ""
    needs: tuple[Need, ...] = ()
    unreached: str = ""
    classes: tuple[str, ...] = ()
    headline: bool = False
    across: Across = "mean"
    legacy: Callable[[pd.DataFrame], pd.Series] | None = field(default=None, repr=False)
    details: str = ""
    panels: dict[str, Panel] = field(default_factory=dict, hash=False, compare=False)

    def title(self, summary: dict | None = None) -> str:
        """The label with the peak window filled in: ``peak calls in 10ms``."""
        return self.label.replace("{window}", window_text(summary))

    def about(self, summary: dict | None = None) -> str:
        """The meaning with the peak window filled in."""
        return self.meaning.replace("{window}", window_text(summary))

    def definition(self, summary: dict | None = None) -> str:
        """``label (unit): meaning``, the window filled in: what the CLI's definitions,
        ``herdsim kpis``, a failed ``--fail-if`` and the report's glossary print."""
        unit = f" ({self.unit})" if self.unit and self.kind != "fraction" else ""
        meaning = self.about(summary)
        return f"{self.title(summary)}{unit}: {meaning}" if meaning else self.title(summary)

    def panel(self, surface: str) -> Panel | None:
        """How *surface* (one of :data:`SURFACES`) shows this KPI, or None."""
        return self.panels.get(surface)

    def has(self, run: Any) -> bool:
        """Whether *run*'s summary holds this KPI: computed (and present), or supplied."""
        if self.key in run.extra:
            return True
        return self.compute is not None and (self.present is None or self.present(run))

    def listed(self, summary: dict) -> bool:
        """Whether a run table lists it for *summary*: held, and nonzero if optional."""
        return self.key in summary and not (self.optional and not summary[self.key])

    def applies(self, summary: dict | None) -> bool:
        """Whether the run of *summary* can define it: False without an outage when it
        needs one (None: as far as we know)."""
        return not ("outage" in self.needs and summary is not None
                    and not summary.get("outages"))

    def reason(self, summary: dict | None = None) -> str:
        """Why an undefined value is undefined, in a few words (the registry's ``missing``)."""
        return self.missing

    def missing_text(self, summary: dict | None = None) -> str:
        """What an undefined value means: ``n/a (no outage)`` for one that needs an
        outage the run lacks, ``not recovered within the run`` for an unreached one,
        else ``n/a`` with the reason."""
        if not self.applies(summary):
            return f"{NA} (no outage)"
        if self.unreached:
            return self.missing
        reason = self.reason(summary)
        return f"{NA} ({reason})" if reason else NA

    def bounds(self, summary: dict) -> tuple[float, float | None] | None:
        """The exact bounds ``(lower, upper)`` of a bounded KPI (upper None: unbounded),
        from its key and :attr:`upper` in *summary*; None when undefined or unbounded by
        kind. A summary saved before the upper bounds existed gives ``(value, value)``
        with no job pending, else ``(value, None)``."""
        value = summary.get(self.key)
        if not self.upper or undefined(value):
            return None
        lower = float(value)  # type: ignore[arg-type]  # defined: checked above
        if self.upper not in summary:  # saved before the bounds: exact only if none pending
            return (lower, lower) if not summary.get("jobs_pending") else (lower, None)
        upper = summary[self.upper]
        return lower, (None if undefined(upper) else float(upper))

    def show(self, value: Any, summary: dict | None = None, ci: float = np.nan) -> str:
        """*value* (a mean, ± *ci* when given) as every table shows it: counts grouped,
        fractions as percentages, a bounded KPI with its bounds (``≥ lo``, ``lo–hi``),
        :meth:`missing_text` when undefined."""
        if undefined(value):
            return self.missing_text(summary)
        if self.kind == "text" or isinstance(value, str):
            return str(value)
        if self.kind == "flag" or isinstance(value, (bool, np.bool_)):
            return "yes" if value else "no"
        if self.kind == "fraction":
            text = percent(float(value))
            return text if undefined(ci) else f"{text} ±{percent(float(ci))}"
        if self.kind == "count" and float(value).is_integer() and undefined(ci):
            text = f"{int(value):,}"
        else:
            text = format_kpi(float(value), ci)
        if self.upper and summary is not None:
            return self.bounded_text(text, value, summary, ci)
        return text

    def bounded_text(self, text: str, value: Any, summary: dict, ci: float = np.nan) -> str:
        """*text* (the *value* formatted) when its bounds meet (or print alike), ``≥ text``
        when unbounded above, ``lo–hi`` otherwise (:meth:`bounds`)."""
        found = self.bounds({**summary, self.key: value})
        if found is None or found[1] is not None and math.isclose(found[0], found[1],
                                                                    rel_tol=1e-9):
            return text
        if found[1] is None:
            return f"≥ {text}"
        low, high = number_text(found[0]), number_text(found[1])
        if low == high:  # apart only past the digits shown: "0.203–0.203" says nothing
            return text
        spread = "" if undefined(ci) else f" ±{number_text(float(ci))}"
        return f"{low}–{high}{spread}"

    def column(self, frame: pd.DataFrame) -> pd.Series:
        """This KPI's column of *frame* (one row per run or arm); computed by
        :attr:`legacy` from a directory saved before it existed, else all NaN."""
        if self.key in frame:
            return frame[self.key]
        if self.legacy is not None:
            return self.legacy(frame)
        return pd.Series(np.nan, index=frame.index)


def on(surface: str, registry: tuple[KPI, ...]) -> list[KPI]:
    """The KPIs *surface* shows, in its order."""
    shown = [kpi for kpi in registry if surface in kpi.panels]
    return sorted(shown, key=lambda kpi: kpi.panels[surface].order)


def window_text(summary: dict | None = None) -> str:
    """The peak window of *summary* as a duration (``10ms``), else ``peak_window``."""
    window = (summary or {}).get("peak_window")
    if window is None or undefined(window):
        return "peak_window"
    return format_duration(float(window))


def number_text(value: float) -> str:
    """``14.7``, ``0.00312``, ``1,234``: three significant digits, thousands grouped."""
    return f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def format_value(value: Any, missing: str = NA) -> str:
    """A summary value for a table: ints grouped, floats to 3 digits, *missing* if None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return f"{value:,}"
    if isinstance(value, (float, np.floating)):
        return number_text(float(value))
    return str(value)


def format_kpi(mean: float, ci: float = np.nan, missing: str = NA) -> str:
    """A KPI mean for a table: ``14.7``, ``14.7 ±0.31``, or *missing* when undefined."""
    if pd.isna(mean):
        return missing
    return number_text(mean) if pd.isna(ci) else f"{number_text(mean)} ±{number_text(ci)}"


def undefined(value: Any) -> bool:
    """None, NaN or pandas' NA: a KPI with no value."""
    if value is None:
        return True
    return not isinstance(value, str) and bool(pd.isna(value))


def percent(value: float) -> str:
    """``0.117`` -> ``11.7%``; never rounds a fraction below 1 up to ``100%``."""
    text = f"{100 * value:.1f}%"
    if text == "100.0%" and value < 1:
        text = f"{100 * value:.3f}%"
    return text


BOUNDS_NOTE = ("≥ lo: a lower bound, lo–hi: the range the true value lies in (pending "
               "jobs counted at their age, or as still waiting forever)")
