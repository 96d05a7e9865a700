"""``herdsim predict``: the fluid (mean-field) model of a scenario, beside ``run``."""

from __future__ import annotations

from contextlib import nullcontext

from rich.table import Table

from herdsim.cli.app import (
    FORMAT,
    ExplainOpt,
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

COMPILING = "predicting (the first prediction after installing compiles the fluid model: " \
            "about 10 s, once)"


@app.command()
def predict(scenario: ScenarioArg, set_: SetOpt = None, out: OutOpt = None,
            json_: JsonOpt = False, quiet: QuietOpt = False, fmt: FormatOpt = FORMAT,
            force: ForceOpt = False, explain: ExplainOpt = False) -> None:
    """Predict a scenario with the fluid (mean-field) model, in well under a second (the
    first prediction after installing compiles the model, about 10 s once): the
    same time series, summary and timeline as run, marked as predicted.

    Exit code 0, 2 for bad input or a mechanism the fluid model cannot represent."""
    from herdsim.cli.tables import definitions, shown_keys
    from herdsim.outputs.predicted_dir import save_prediction
    from herdsim.results.predicted import predict as fluid

    formats = parse_formats(fmt)
    sc = load(scenario, set_)
    target = output_dir(out, f"{sc.name}-predicted")
    try:
        with err_console.status(COMPILING) if not (quiet or json_) else nullcontext():
            prediction = fluid(sc, force=force)
    except ScenarioError as exc:  # what it cannot represent: named in the file's terms
        raise ScenarioError(exc.problems, str(scenario)) from None
    save_prediction(prediction, target, formats)
    if json_:
        emit_json(prediction.summary)
    elif not quiet:
        console.print(table(prediction.summary, f"{sc.name} — {sc.retry.strategy} — "
                                                "predicted (fluid model)"))
        if explain:
            console.print(definitions(shown_keys(prediction.summary), prediction.summary))
    if not quiet:
        (err_console if json_ else console).print(f"outputs: [bold]{safe(target)}[/]",
                                                  soft_wrap=True)


def table(summary: dict, title: str) -> Table:
    """The predicted KPIs as run's table shows them (the KPI registry's labels, units and
    formats), the rows only a prediction has marked †, and what they rest on."""
    from herdsim.analysis.kpis.predicted import MARK, MARKED
    from herdsim.cli.tables import summary_table
    from herdsim.results.predicted import notes

    return summary_table(summary, title, dict.fromkeys(MARKED, MARK), notes(summary))
