"""The KPIs only a prediction has (``herdsim predict``, :mod:`herdsim.results.predicted`):
whose numbers they are, its step, the mean flow's peak beside the bunched one, why a
state is not claimed, and what the model itself cost. A prediction supplies them; a run
never has them. Every other key of a predicted summary is a run KPI, read as a mean
amount (a count need not be whole)."""

from __future__ import annotations

from herdsim.analysis.kpis.base import KPI, Panel

NEAR = "near threshold"  # a predicted state: random bunching may cross the crash rule
# what a predicted summary's peak_calls is, beside peak_calls_mean: the rows a table marks
BUNCHED = ("peak_calls", "peak_to_capacity")
MARK = " †"  # after the label of a row only a prediction has, or reads its own way
MARKED = ("peak_calls_mean", *BUNCHED)
BUNCHED_NOTE = ("with random bunching of the traffic's random part (Poisson arrivals, "
                "jittered sleeps): the level the busiest sliding window crosses with even "
                "odds")


PREDICTED_KPIS: tuple[KPI, ...] = (
    KPI("predicted", "predicted by", kind="text", across=None,
        meaning="whose numbers a summary holds: 'fluid model' for herdsim predict's "
                "mean-field model (no individual job, call or random draw); a simulation's "
                "summary has no such key"),
    KPI("step", "integration step", "s", across=None,
        meaning="predicted: the fluid model's time step"),
    KPI("near_threshold", "why near threshold", kind="text", optional=True, across=None,
        meaning="predicted: set when the mean flow's busiest collapse window stays under "
                "the crash threshold but random bunching reaches it with a 5% chance; the "
                f"state is then '{NEAR}' (a metastable state stays and carries the note): "
                "the mean count, the 5% level and the threshold"),
    KPI("peak_calls_mean", "peak calls in {window}, mean flow", "calls", kind="count",
        better="lower",
        meaning="predicted: downstream calls of the mean flow in its busiest window of "
                "width peak_window, with no random bunching: what a deterministic cohort "
                "gives; peak_calls beside it adds the bunching",
        panels={"run": Panel(12.5)}),
    KPI("model_cpu_seconds", "fluid model CPU time", "s",
        meaning="predicted: CPU seconds the fluid model's grid and integration took in "
                "this process (not reading, saving or drawing); the first prediction "
                "after installing includes compiling the model's loop (about 10 s, once), "
                "a later process loading it (about 0.4 s)",
        panels={"run": Panel(35.5)}),
)


def near_text(state: object, note: object) -> str | None:
    """``near threshold, so no state is claimed: <why>`` (or, for a metastable state,
    which a crash more cannot lift, ``near threshold, metastable all the same: <why>``);
    None without a note."""
    if not isinstance(note, str):
        return None
    claim = "so no state is claimed" if state == NEAR else \
        f"{state} all the same (a crash more cannot lift it)"
    return f"{NEAR}, {claim}: {note}"
