"""``herdsim boundary``: where the chance of recovering crosses one half along a setting."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from herdsim.cli.app import (
    ForceOpt,
    JsonOpt,
    LocalProcessesOpt,
    ScenarioArg,
    SchedulerOpt,
    SetOpt,
    app,
    console,
    emit_json,
    load,
    output_dir,
    safe,
)
from herdsim.errors import UsageError


@app.command("boundary")
def boundary_command(
    scenario: ScenarioArg,
    find: Annotated[list[str], typer.Option(
        "--find", metavar="PATH",
        help="A numeric setting (downstream.outages.0.duration, workload.rate, "
             "retry.max_retries ...); twice: the boundary curve of the first along the "
             "second.")],
    span: Annotated[str | None, typer.Option(
        "--range", metavar="LOW:HIGH",
        help="The first path's range searched (default: a tenth to four times today's "
             "value).", show_default=False)] = None,
    max_simulations: Annotated[int, typer.Option(
        "--max-simulations", min=3, metavar="N", help="Simulations per boundary at most.")
    ] = 40,
    set_: SetOpt = None,
    out: Annotated[Path | None, typer.Option(
        "--out", metavar="DIR", help="Where the safe-operating figure goes (default "
                                     "runs/<name>-boundary).", show_default=False)] = None,
    scheduler: SchedulerOpt = None, processes: LocalProcessesOpt = None,
    sweep_map: Annotated[Path | None, typer.Option(
        "--map", metavar="SWEEP_DIR",
        help="With two --find paths: also draw the curve over this sweep's map (its axes "
             "the two paths) to boundary_map.png.", show_default=False)] = None,
    json_: JsonOpt = False, force: ForceOpt = False,
) -> None:
    """Find where recovering stops: the value of a setting at which P(recover) crosses
    1/2, from the fluid model's answer, confirmed by replicated simulations.

    Exit code 0, 2 for bad input."""
    from herdsim.experiments.boundary import boundary
    from herdsim.outputs.atomic import staged_dir
    from herdsim.plots import boundary as figures

    sc = load(scenario, set_)
    lo_hi = _span(span)
    if sweep_map is not None and len(find) != 2:
        raise UsageError("--map: draws the boundary curve; give two --find paths")
    mapped = _sweep(sweep_map, find) if sweep_map is not None else None
    target = output_dir(out, f"{sc.name}-boundary")
    found = boundary(sc, find, lo_hi, max_simulations=max_simulations, processes=processes,
                     scheduler=scheduler, force=force,
                     label=None if json_ else "simulating")
    edges = found if isinstance(found, list) else [found]
    with staged_dir(target) as staging:
        staging.mkdir()
        if isinstance(found, list):
            points = [(_read(b.scenario, find[1]), b.value, b.low, b.high) for b in edges]
            fig = figures.curve(find[0], find[1], points,
                                (_read(sc, find[1]), _read(sc, find[0])), sc.name)
            if mapped is not None:
                from herdsim.plots.metastability_map import plot_map

                runs, manifest = mapped
                axes = {a["path"]: a["values"] for a in manifest["axes"]}
                figures.over_map(plot_map(runs, manifest, x=find[1], y=find[0]),
                                 sc.retry.strategy, axes[find[1]], axes[find[0]],
                                 points).savefig(staging / "boundary_map.png", dpi=90)
        else:
            fig = figures.safe_operating(found.path, found.value, found.low, found.high,
                                         found.current, found.below, found.runs, sc.name)
        fig.savefig(staging / "boundary.png", dpi=110)
        for i, b in enumerate(edges):
            b.runs.to_csv(staging / f"runs{i}.csv", index=False)
    if json_:
        emit_json([{"path": b.path, "value": b.value, "low": b.low, "high": b.high,
                    "fluid": b.fluid, "recovers_below": b.below, "current": b.current,
                    "simulations": b.simulations, "text": b.text()} for b in edges])
        return
    for b in edges:
        console.print(safe(b.text()), highlight=False, soft_wrap=True)
    console.print(f"outputs: [bold]{safe(target)}[/]", soft_wrap=True)


def _sweep(directory: Path, find: list[str]):
    """The sweep's table and manifest, checked to have both paths as axes."""
    from herdsim.outputs.sweep_dir import load_sweep

    runs, manifest = load_sweep(directory)
    swept = [a["path"] for a in manifest["axes"]]
    missing = [p for p in find if p not in swept]
    if missing:
        raise UsageError(f"--map {directory}: {missing[0]} is not one of its axes "
                         f"({', '.join(swept)})")
    return runs, manifest


def _span(text: str | None) -> tuple[float, float] | None:
    if text is None:
        return None
    from herdsim.policies.durations import parse_duration

    try:
        lo, hi = (parse_duration(part) for part in text.split(":"))
    except ValueError:
        raise UsageError(f"--range {text}: expected LOW:HIGH, e.g. 250ms:16s or "
                         "300:900") from None
    return lo, hi


def _read(sc, path: str) -> float:
    from herdsim.config.schema import value_at

    return float(value_at(sc, path))
