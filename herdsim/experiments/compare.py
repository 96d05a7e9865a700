"""Compare arms of one scenario (strategies or presets x varied settings) with common random
numbers.

Replication ``r`` of every arm runs with seed ``scenario.seed + r``, so arms differ only by
what was varied (common random numbers): replication 0 of an arm is exactly
``herdsim.run`` of that arm's scenario. Saving is :func:`herdsim.outputs.compare_dir.save`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rich
from rich.console import Console

from herdsim.analysis.kpis import show
from herdsim.config import arguments
from herdsim.config.arguments import MAX_ARMS
from herdsim.config.loading import load_scenario
from herdsim.config.overrides import value_text
from herdsim.config.scenario import Scenario
from herdsim.errors import ScenarioError, TaskError
from herdsim.experiments.design import seeded
from herdsim.experiments.parallel import default_processes, imap_unordered
from herdsim.planning import estimate
from herdsim.policies import presets as preset_table
from herdsim.policies.backoff import BUILT_IN
from herdsim.results.comparison import (
    Arm,
    Comparison,
    arm_scenario,
    peak_rate_frame,
    short_name,
)
from herdsim.results.result import run


def _label(strategy: str, settings: dict[str, Any]) -> str:
    varied = ", ".join(f"{key}={value_text(value)}" for key, value in settings.items())
    return f"{short_name(strategy)}, {varied}" if varied else short_name(strategy)


def _preset_arms(scenario: Scenario, names: Sequence[str],
                 vary: dict[str, Sequence[Any]]) -> list[Arm]:
    """Arms of ``--presets``: each preset replaces the fields it controls, then the varied
    values apply on top."""
    if len(set(names)) != len(names):
        raise ScenarioError([("", f"a preset is listed twice: {', '.join(names)}")],
                            "presets")
    arms = []
    for name in names:
        try:
            strategy = preset_table.get(name).fields["retry.strategy"]
        except ValueError as exc:
            raise ScenarioError([("retry.preset", str(exc))], "presets") from None
        for combo in itertools.product(*vary.values()):
            settings = {"retry.preset": name, **dict(zip(vary, combo, strict=True))}
            try:
                scenario_of_arm = arm_scenario(scenario, strategy, settings)
            except ScenarioError as exc:
                source = "vary" if _varied_here(scenario, strategy, settings) else "presets"
                raise ScenarioError(exc.problems, source) from None
            varied = {k: v for k, v in settings.items() if k != "retry.preset"}
            arms.append(Arm(_label(name, varied), strategy, settings, scenario_of_arm))
    _distinct(arms)
    return arms


def build_arms(scenario: Scenario, strategies: Sequence[str] | None = None,
               vary: dict[str, Sequence[Any]] | None = None,
               presets: Sequence[str] | None = None) -> list[Arm]:
    """Every arm: each strategy (or preset) x each combination of varied values, validated
    up front. With neither strategies nor presets: every built-in strategy, or, when
    *vary* is given, the scenario's own strategy alone (a vary varies what it names).

    Raises :class:`ScenarioError` naming the offending strategy, preset or setting.
    """
    vary = dict(vary or {})
    names = (list(strategies) if strategies else [scenario.retry.strategy] if vary
             else list(BUILT_IN))
    if "retry.strategy" in vary:
        raise ScenarioError([("retry.strategy", "not a vary key: list the strategies to "
                              "compare with --strategies (strategies=[...] in Python)")],
                            "vary")
    if "retry.preset" in vary:
        raise ScenarioError([("retry.preset", "not a vary key: list the presets to compare "
                              "with --presets (presets=[...] in Python)")], "vary")
    if presets and strategies:
        raise ScenarioError([("", "give strategies or presets, not both")], "presets")
    if len(set(names)) != len(names):
        raise ScenarioError([("", f"a strategy is listed twice: {', '.join(names)}")],
                            "strategies")
    for key, values in vary.items():
        if isinstance(values, (str, bytes)) or not values:
            raise ScenarioError([(key, "expected a non-empty list of values")], "vary")
        texts = [value_text(v) for v in values]
        if len(set(texts)) != len(texts):
            raise ScenarioError([(key, f"a value is listed twice: {', '.join(texts)}")], "vary")
    arms_n = len(presets or names) * math.prod(len(values) for values in vary.values())
    if arms_n > MAX_ARMS:
        raise ScenarioError([("", f"{arms_n:,} arms (strategies or presets x the varied "
                                  f"values): at most {MAX_ARMS:,}, each built before any "
                                  "runs")], "vary")
    if presets:
        return _preset_arms(scenario, list(presets), vary)
    arms = []
    for name in names:
        for combo in itertools.product(*vary.values()):
            settings = dict(zip(vary, combo, strict=True))
            try:
                scenario_of_arm = arm_scenario(scenario, name, settings)
            except ScenarioError as exc:
                source = "vary" if _varied_here(scenario, name, settings) else "strategies"
                raise ScenarioError(exc.problems, source) from None
            arms.append(Arm(_label(name, settings), name, settings, scenario_of_arm))
    _distinct(arms)
    return arms


def _varied_here(scenario: Scenario, strategy: str, settings: dict[str, Any]) -> bool:
    """Whether an arm's refusal is its varied settings' doing: the arm without them is
    accepted (else its strategy or preset is refused alone: a hedged scenario refuses
    any, and the refusal names --strategies, not a --vary that was never given)."""
    own = {k: v for k, v in settings.items() if k == "retry.preset"}
    if own == settings:
        return False
    try:
        arm_scenario(scenario, strategy, own)
    except ScenarioError:
        return False
    return True


def _distinct(arms: list[Arm]) -> None:
    """Refuse two arms that are one scenario (``--vary workers.count=1,01``, or
    ``50ms,0.05``): they would run the same thing twice under two labels."""
    seen: dict[str, str] = {}
    for arm in arms:
        key = arm.scenario.to_yaml()
        if key in seen:
            raise ScenarioError([("", f"the arms {seen[key]!r} and {arm.label!r} are the same "
                                      "scenario (two values that mean the same)")], "vary")
        seen[key] = arm.label


def _simulate(task: tuple[Scenario, int]) -> dict[str, Any]:
    """Run one (arm, replication) in a worker process; return only what a comparison keeps."""
    scenario, replication = task
    result = run(seeded(scenario, replication), force=True)  # compare() checked the arms
    return {
        "summary": result.summary,
        "timeseries": result.timeseries,
        "sleeps": result.sleeps,
        "peaks": peak_rate_frame(result),
        "crashes": result.tier_crashes,
    }


class Failed(TaskError):
    """An arm raised during :func:`compare` (a :class:`TaskError` naming it and the cause;
    every other arm was stopped): ``comparison`` holds the arms that finished before, whole,
    as :class:`Interrupted` does (None when none had)."""

    def __init__(self, error: TaskError, comparison: Comparison | None):
        super().__init__(error.run, error.cause, error.message, error.user, error.where,
                         error.traceback)
        self.comparison = comparison


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`compare` after at least one arm finished all its replications:
    ``comparison`` holds those arms whole (a complete comparison of them, its
    ``unfinished`` naming the arms left out); no arm is in it in part."""

    def __init__(self, comparison: Comparison):
        super().__init__(f"interrupted: {len(comparison.arms)} arms finished")
        self.comparison = comparison


def plan_text(arms: list[Arm], replications: int, at_once: int) -> str:
    """What a comparison is about to run, from :mod:`herdsim.planning.estimate`: runs, the
    largest run's jobs, calls and memory, how many at once, and the wall time (measured
    speed; said only when it is worth saying)."""
    guesses = [estimate.estimate(arm.scenario) for arm in arms]
    largest = max(guesses, key=lambda e: e.events)
    runs = len(arms) * replications
    took = estimate.timing(guesses, at_once, replications=replications)
    return (f"{runs} run{'s' * (runs > 1)} ({len(arms)} arms x {replications}), {at_once} at "
            f"a time; the largest: {largest.describe()}"
            + ("" if took is None else f"; time: {took.describe()}"))


def _finished(base: Scenario, arms: list[Arm], replications: int,
              outputs: list[dict[str, Any]]) -> Comparison | None:
    """The arms whose every replication finished, as a comparison of them (None if none)."""
    done = [i for i in range(len(arms))
            if all(outputs[i * replications + r] for r in range(replications))]
    if not done:
        return None
    partial = Comparison.from_outputs(
        base, [arms[i] for i in done], replications,
        [outputs[i * replications + r] for i in done for r in range(replications)])
    partial.unfinished = [arm.label for i, arm in enumerate(arms) if i not in done]
    return partial


def _runs_in_main_only(arms: list[Arm]) -> bool:
    """True when a strategy lives in ``__main__`` (a notebook cell): workers cannot import it."""
    return any(arm.strategy.startswith("__main__:") for arm in arms)


def compare(scenario: Scenario | str | Path, strategies: Sequence[str] | None = None,
            vary: dict[str, Sequence[Any]] | None = None, replications: int = 1,
            processes: int | None = None, progress: bool | None = None,
            force: bool = False, presets: Sequence[str] | None = None) -> Comparison:
    """Run every arm of *scenario* ``replications`` times and line them up.

    *strategies* defaults to every built-in (to the scenario's own strategy when *vary* is
    given and *presets* is not); *presets* (instead of strategies) names
    library policies (``herdsim presets``), each replacing the fields it controls; *vary*
    maps dotted scenario keys to the values to try, on top of either. Runs go to
    ``processes`` local processes (default: all cores); strategies defined in ``__main__``
    (a notebook) run in this process. ``progress`` shows a rich
    progress bar (default: in a terminal, not in Jupyter, where rich needs ipywidgets).
    A bad strategy or setting raises :class:`ScenarioError` before anything runs, and arms
    this machine cannot hold, run ``processes`` at a time, :class:`CapacityError` (unless
    *force*). With progress, the plan is printed first (:func:`plan_text`) and a line as
    each arm finishes. Ctrl-C after an arm finished raises :class:`Interrupted`, holding
    the finished arms; an arm that raises stops the others and raises :class:`Failed`,
    naming the arm and the cause, holding the arms finished before.
    """
    base = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    replications = arguments.whole("replications", replications,  # type: ignore[assignment]
                                   maximum=arguments.MAX_REPLICATIONS)
    processes = arguments.whole("processes", processes, optional=True)
    force = arguments.flag("force", force)
    progress = None if progress is None else arguments.flag("progress", progress)
    arms = build_arms(base, arguments.names("strategies", strategies),
                      arguments.mapping("vary", vary), arguments.names("presets", presets))
    if _runs_in_main_only(arms):
        processes = 1
    at_once = min(len(arms) * replications, processes or default_processes())
    estimate.check([arm.scenario for arm in arms], at_once, force, replications)
    tasks = [(arm.scenario, r) for arm in arms for r in range(replications)]
    if progress is None:
        progress = not rich.get_console().is_jupyter
    label = f"{base.name}: {len(arms)} arms x {replications}" if progress else None
    if progress:
        Console(stderr=True, highlight=False).print(
            f"{base.name}: {plan_text(arms, replications, at_once)}", markup=False)
    outputs: list[dict[str, Any]] = [{}] * len(tasks)
    left = {i: replications for i in range(len(arms))}

    def note(index: int, output: dict[str, Any]) -> str | None:
        arm = index // replications
        left[arm] -= 1
        if left[arm]:
            return None
        s = output["summary"]
        finished = sum(1 for n in left.values() if n == 0)
        return (f"  arm {arms[arm].label} done ({finished} of {len(arms)}): {s['state']}, "
                f"{show('succeeded_fraction', s['succeeded_fraction'], s)} succeeded")

    def name(index: int, _: object) -> str:
        arm, replication = divmod(index, replications)
        return f"arm {arms[arm].label!r}" + (f", replication {replication}"
                                              if replications > 1 else "")

    try:
        for index, output in imap_unordered(_simulate, tasks, processes, label, note=note,
                                            name=name):
            outputs[index] = output
    except TaskError as error:
        raise Failed(error, _finished(base, arms, replications, outputs)) \
            from error.__cause__
    except KeyboardInterrupt:
        partial = _finished(base, arms, replications, outputs)
        if partial is None:
            raise
        raise Interrupted(partial) from None
    return Comparison.from_outputs(base, arms, replications, outputs)


