"""``herdsim boundary``: where the chance of recovering crosses one half along a setting."""

from __future__ import annotations

import math
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
    from herdsim.experiments.boundary import Curve, boundary, spread
    from herdsim.outputs.atomic import staged_dir

    sc = load(scenario, set_)
    lo_hi = _span(span)
    if sweep_map is not None and len(find) != 2:
        raise UsageError("--map: draws the boundary curve; give two --find paths")
    # over a map, the curve spans the map's axis of the second path
    along = (spread(_sweep(sweep_map, find, sc.retry.strategy)[find[1]])
             if sweep_map is not None else None)
    target = output_dir(out, f"{sc.name}-boundary")
    found = boundary(sc, find, lo_hi, along=along, max_simulations=max_simulations,
                     processes=processes, scheduler=scheduler, force=force,
                     label=None if json_ else "simulating")
    edges = list(found) if isinstance(found, Curve) else [found]
    with staged_dir(target) as staging:
        staging.mkdir()
        found.plot().savefig(staging / "boundary.png", dpi=110)
        if sweep_map is not None and isinstance(found, Curve):
            found.plot(sweep_map).savefig(staging / "boundary_map.png", dpi=90)
        for i, b in enumerate(edges):
            b.runs.to_csv(staging / f"runs{i}.csv", index=False)
    if json_:
        at = ([{find[1]: v} for v in found.values] if isinstance(found, Curve)
              else [{}])
        emit_json([{"path": b.path, **({"at": where} if where else {}), "value": b.value,
                    "low": b.low, "high": b.high, "unit": b.unit, "fluid_from": b.fluid_from,
                    "fluid": b.fluid, "recovers_below": b.below, "current": b.current,
                    "simulations": b.simulations, "text": b.text()}
                   for b, where in zip(edges, at, strict=True)])
        return
    console.print(safe(found.text()), highlight=False, soft_wrap=True)
    console.print(f"outputs: [bold]{safe(target)}[/]", soft_wrap=True)


def _sweep(directory: Path, find: list[str], strategy: str) -> dict[str, list]:
    """The sweep's axes (path -> values), checked before the search: both paths among
    them, no third axis of several values (the map shows two), and a panel of the
    scenario's *strategy* to draw the curve on."""
    from herdsim.outputs.sweep_dir import load_sweep

    _, manifest = load_sweep(directory)
    axes = {a["path"]: a["values"] for a in manifest["axes"]}
    missing = [p for p in find if p not in axes]
    if missing:
        raise UsageError(f"--map {directory}: {missing[0]} is not one of its axes "
                         f"({', '.join(axes)})")
    others = [p for p, values in axes.items() if p not in find and len(values) > 1]
    if others:
        raise UsageError(f"--map {directory}: it also sweeps {', '.join(others)}; its map "
                         "shows the two --find paths only")
    if strategy not in manifest["strategies"]:
        raise UsageError(f"--map {directory}: it has no panel of the scenario's strategy "
                         f"{strategy} ({', '.join(manifest['strategies'])}); pick one with "
                         "--set retry.strategy=...")
    return axes


def _span(text: str | None) -> tuple[float, float] | None:
    """``--range LOW:HIGH`` (numbers or durations): finite, 0 < LOW < HIGH."""
    if text is None:
        return None
    from herdsim.policies.durations import parse_duration

    try:
        lo, hi = (parse_duration(part) for part in text.split(":"))
    except ValueError:
        raise UsageError(f"--range {text}: expected LOW:HIGH, e.g. 250ms:16s or "
                         "300:900") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise UsageError(f"--range {text}: LOW and HIGH must be finite numbers")
    if not 0 < lo < hi:
        raise UsageError(f"--range {text}: expected 0 < LOW < HIGH")
    return lo, hi
