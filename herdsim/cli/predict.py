"""``herdsim predict``: the fluid (mean-field) model of a scenario, beside ``run``."""

from __future__ import annotations

from rich.table import Table

from herdsim.cli.app import (
    FORMAT,
    ForceOpt,
    FormatOpt,
    JsonOpt,
    OutOpt,
    QuietOpt,
    ScenarioArg,
    SetOpt,
    app,
    console,
    emit_json,
    err_console,
    load,
    output_dir,
    parse_formats,
    safe,
)
from herdsim.errors import ScenarioError

SHOWN = (  # key, label, unit, format
    ("state", "state", "", "{}"),
    ("succeeded_fraction", "jobs succeeded", "of jobs", "{:.3f}"),
    ("jobs_submitted", "jobs submitted", "jobs", "{:,.0f}"),
    ("jobs_succeeded", "jobs succeeded", "jobs", "{:,.0f}"),
    ("jobs_dead_lettered", "jobs dead-lettered", "jobs", "{:,.0f}"),
    ("jobs_pending", "jobs pending at the end", "jobs", "{:,.0f}"),
    ("attempts_total", "calls", "calls", "{:,.0f}"),
    ("retries_total", "retries", "calls", "{:,.0f}"),
    ("collapses", "collapses", "", "{}"),
    ("recovery_time", "recovery time", "s", "{:.1f}"),
    ("peak_calls_mean", "busiest window, mean flow", "calls", "{:,.0f}"),
    ("peak_calls", "busiest window, with random bunching", "calls", "{:,.0f}"),
)


@app.command()
def predict(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
            json_: JsonOpt = False, quiet: QuietOpt = False, fmt: FormatOpt = FORMAT,
            force: ForceOpt = False) -> None:
    """Predict a scenario with the fluid (mean-field) model, in well under a second: the
    same time series, summary and timeline as run, marked as predicted.

    Exit code 0, 2 for bad input or a mechanism the fluid model cannot represent."""
    from herdsim.outputs.predicted_dir import save_prediction
    from herdsim.results.predicted import predict as fluid

    formats = parse_formats(fmt)
    sc = load(scenario, set_)
    target = output_dir(out, f"{sc.name}-predicted")
    try:
        prediction = fluid(sc, force=force)
    except ScenarioError as exc:  # what it cannot represent: named in the file's terms
        raise ScenarioError(exc.problems, str(scenario)) from None
    save_prediction(prediction, target, formats)
    if json_:
        emit_json(prediction.summary)
    elif not quiet:
        console.print(table(prediction.summary, f"{sc.name} — {sc.retry.strategy} — "
                                                "predicted (fluid model)"))
    if not quiet:
        (err_console if json_ else console).print(f"outputs: [bold]{safe(target)}[/]",
                                                  soft_wrap=True)


def table(summary: dict, title: str) -> Table:
    """The predicted KPIs, with what the peak and the state rest on."""
    out = Table(title=safe(title), show_header=True, header_style="bold")
    for name in ("KPI", "value", "unit"):
        out.add_column(name, justify="right" if name == "value" else "left")
    for key, label, unit, form in SHOWN:
        value = summary.get(key)
        text = "never" if value is None and key == "recovery_time" else \
            "n/a" if value is None else form.format(value)
        out.add_row(label, safe(text), unit)
    notes = [f"step {summary['step'] * 1000:g} ms; peaks over "
             f"{summary['peak_window'] * 1000:g} ms: the mean flow, and its random part (Poisson "
             "arrivals, jittered sleeps) bunched as a sliding window's busiest"]
    if summary.get("near_threshold"):
        notes.append("near threshold: " + summary["near_threshold"])
    out.caption = safe("; ".join(notes))
    return out
