"""The kernel's contract with SimPy, as event logs (the style of SimPy's own tests).

:mod:`herdsim.model.kernel` pushes its own entries on SimPy's event heap and runs the heap
with its own loop. Every test runs one small program twice, once through the kernel
(``at``, ``later``, ``trigger_later``, ``run_until``, ``Runner``) and once through SimPy's
public machinery (``Timeout``, ``schedule``, ``run``, ``Process``), and asserts the same
log from both: a SimPy release that changed its heap entry or its order would fail here
before it reorders a bundled scenario (``tests/test_golden.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import simpy
from simpy import Interrupt
from simpy.core import NORMAL, URGENT

import herdsim
from herdsim.model.kernel import Environment, Runner, at, later, trigger_later, unfired


def simpy_at(env: simpy.Environment, when: float, value=None, priority=NORMAL):
    """SimPy's own way to schedule a triggered event at *when* with *priority*."""
    event = env.event()
    event._ok, event._value = True, value
    env.schedule(event, priority, when - env.now)
    return event


def run(env: simpy.Environment, until: float) -> None:
    """The kernel's loop on a kernel Environment, SimPy's ``run`` on SimPy's."""
    if isinstance(env, Environment):
        env.run_until(until)
    else:
        env.run(until=until)


def logger(env, log: list):
    """``note(name)``: a callback logging ``(name, now, the event's value)``."""
    def note(name):
        return lambda event: log.append((name, env.now, event._value))
    return note


@pytest.mark.parametrize(("make_env", "timer"), [(Environment, at), (simpy.Environment, simpy_at)],
                         ids=["kernel", "simpy"])
def test_one_instant_fires_by_priority_then_in_scheduling_order(make_env, timer):
    """Rule (SimPy's heap entry: time, priority, event id): at one time URGENT comes
    first, then events fire in the order they were scheduled, whatever made them."""
    env, log = make_env(), []
    note = logger(env, log)
    env.timeout(2, "a").callbacks.append(note("a"))
    timer(env, 2, "b").callbacks.append(note("b"))
    timer(env, 1, "c").callbacks.append(note("c"))
    env.timeout(2, "d").callbacks.append(note("d"))
    timer(env, 2, "e", URGENT).callbacks.append(note("e"))
    run(env, 5)
    assert log == [("c", 1, "c"), ("e", 2, "e"), ("a", 2, "a"), ("b", 2, "b"), ("d", 2, "d")]


def test_later_is_a_timeout_and_trigger_later_a_succeed():
    """Rule: ``later(env, d, v)`` fires where ``env.timeout(d, v)`` made at the same moment
    would, and ``trigger_later(env, event, v)`` where ``event.succeed(v)`` would."""
    logs = []
    for kernel in (True, False):
        env, log = Environment(), []
        note = logger(env, log)
        waited = unfired() if kernel else env.event()
        waited.callbacks.append(note("waited"))
        env.timeout(0, "first").callbacks.append(note("first"))
        (later(env, 1, "l") if kernel else env.timeout(1, "l")).callbacks.append(note("l"))
        if kernel:
            trigger_later(env, waited, "w")
        else:
            waited.succeed("w")
        env.timeout(1, "t").callbacks.append(note("t"))
        env.run_until(3)
        logs.append(log)
    assert logs[0] == logs[1] == [("first", 0, "first"), ("waited", 0, "w"), ("l", 1, "l"),
                                  ("t", 1, "t")]


def test_trigger_later_with_a_delay_fires_a_waited_event_as_a_timeout_would():
    """Rule: an event with waiters fired ``delay`` later takes the heap place of a
    ``Timeout(delay)`` made at that moment."""
    env, log = Environment(), []
    note = logger(env, log)
    event = unfired()
    event.callbacks.append(note("call"))
    env.timeout(2, "before").callbacks.append(note("before"))
    trigger_later(env, event, "done", 2)
    env.timeout(2, "after").callbacks.append(note("after"))
    env.run_until(3)
    assert log == [("before", 2, "before"), ("call", 2, "done"), ("after", 2, "after")]


def run_until_program(env, timer, log):
    note = logger(env, log)
    timer(env, 3, "u", URGENT).callbacks.append(note("u"))
    timer(env, 3, "n").callbacks.append(note("n"))

    def schedule_late(event):
        note("x")(event)
        timer(env, 3, "late", URGENT).callbacks.append(note("late"))

    timer(env, 1, "x").callbacks.append(schedule_late)


@pytest.mark.parametrize("kernel", [True, False], ids=["run_until", "simpy-run"])
def test_run_until_stops_where_run_until_stops(kernel):
    """Rule (``run(until=t)``): the stop is an URGENT event scheduled when the run is
    called, so at *t* it comes after URGENT events scheduled before the call and before
    everything else; the next run carries on with those, in order."""
    env, log = (Environment(), []) if kernel else (simpy.Environment(), [])
    run_until_program(env, at if kernel else simpy_at, log)
    run(env, 3)
    assert (log, env.now) == ([("x", 1, "x"), ("u", 3, "u")], 3)
    run(env, 4)
    assert log[2:] == [("late", 3, "late"), ("n", 3, "n")]
    assert env.now == 4


def test_run_until_rejects_a_time_not_ahead_with_simpys_message():
    """Rule: a stop time not after now is a ValueError, worded as ``run`` words it."""
    errors = []
    for env in (Environment(initial_time=2), simpy.Environment(initial_time=2)):
        with pytest.raises(ValueError) as error:
            run(env, 2)
        errors.append(str(error.value))
    assert errors[0] == errors[1]


@pytest.mark.parametrize("defused", [False, True])
def test_an_unhandled_failure_crashes_run_until_as_it_crashes_run(defused):
    """Rule: a failed event nobody defused raises a copy of its exception (the original as
    its cause) out of the run; a defused one does not."""
    outcomes = []
    for env in (Environment(), simpy.Environment()):
        failing = env.event()
        failing.fail(KeyError("boom"))
        if defused:
            failing.defused = True
        try:
            run(env, 1)
            outcomes.append(("ran", env.now))
        except KeyError as crash:
            outcomes.append(("crashed", crash.args, crash.__cause__ is failing.value))
    expected = ("ran", 1) if defused else ("crashed", ("boom",), True)
    assert outcomes == [expected, expected]


def runner_program(env, log):
    """A generator for a Runner: logs its start, waits 2 s for a value, then for an
    interruptible 5 s wait, then 1 s."""
    runner = Runner(env)

    def body():
        send = runner.send
        yield
        log(("start", env.now))
        later(env, 2, "v").callbacks.append(send)
        value = (yield)._value
        log(("got", env.now, value))
        runner.target = event = later(env, 5)
        event.callbacks.append(send)
        try:
            yield
            log(("woke", env.now))
        except Interrupt as interrupt:
            log(("interrupted", env.now, interrupt.cause))
        later(env, 1).callbacks.append(send)
        yield
        log(("resumed", env.now))
        yield  # nothing fires it: the runner stays here

    return runner, body()


def process_program(env, log):
    """The same program as a ``simpy.Process``."""

    def body():
        log(("start", env.now))
        value = yield env.timeout(2, "v")
        log(("got", env.now, value))
        try:
            yield env.timeout(5)
            log(("woke", env.now))
        except Interrupt as interrupt:
            log(("interrupted", env.now, interrupt.cause))
        yield env.timeout(1)
        log(("resumed", env.now))
        yield env.event()

    return body()


@pytest.mark.parametrize("kernel", [True, False], ids=["Runner", "Process"])
def test_a_runner_starts_waits_and_is_interrupted_as_a_process(kernel):
    """Rules (``Process``): a process starts at an URGENT event now, before the events
    already due now; an interrupt is thrown in at an URGENT event now, ahead of NORMAL
    events due at that instant, and detaches it from what it waited for (which then
    fires without resuming it)."""
    env, log = Environment(), []
    note = logger(env, log)
    env.timeout(0, "due").callbacks.append(lambda e: log.append(("due", env.now)))
    if kernel:
        runner, body = runner_program(env, log.append)
        runner.start(body)
        interrupt = runner.interrupt
    else:
        interrupt = env.process(process_program(env, log.append)).interrupt
    at(env, 4).callbacks.append(lambda e: interrupt("why"))
    at(env, 4, "other").callbacks.append(note("other"))
    env.run_until(20)
    assert log == [("start", 0), ("due", 0), ("got", 2, "v"), ("interrupted", 4, "why"),
                   ("other", 4, "other"), ("resumed", 5)]


def test_a_simpy_process_waits_on_kernel_timers_and_is_interrupted_off_them():
    """Rule (``queues.JobQueue``, the general worker loop): a ``simpy.Process`` resumes
    from a kernel Timer with its value, and ``Process.interrupt`` detaches it from one."""
    env, log = Environment(), []

    def body():
        value = yield at(env, 1, "x")
        log.append(("got", env.now, value))
        waited = unfired()
        try:
            yield waited
        except Interrupt as interrupt:
            log.append(("interrupted", env.now, interrupt.cause))
        trigger_later(env, waited, "late")  # fires with nobody waiting
        value = yield later(env, 1, "y")
        log.append(("got", env.now, value))

    proc = env.process(body())
    at(env, 2).callbacks.append(lambda e: proc.interrupt("why"))
    env.run_until(10)
    assert log == [("got", 1, "x"), ("interrupted", 2, "why"), ("got", 3, "y")]
    assert not proc.is_alive


def test_now_is_simpys_clock():
    """Rule: the kernel's ``now`` is the clock ``simpy.Environment.now`` reports."""
    env = Environment(initial_time=1.5)
    assert env.now == simpy.Environment.now.fget(env) == 1.5
    later(env, 2.25).callbacks.append(lambda e: None)
    env.run_until(10)
    assert env.now == simpy.Environment.now.fget(env) == 10


def test_value_is_the_slot_simpy_reads():
    """Rule: a kernel event's ``value`` is the ``_value`` SimPy's loop and ``Process``
    read, under its public name (the engine writes and reads only ``value``)."""
    timer = unfired()
    timer.value = "job"
    env, log = Environment(), []
    timer.callbacks.append(lambda event: log.append(event._value))
    trigger_later(env, timer, timer.value, 1)
    env.run_until(2)
    assert log == ["job"]


SIMPY_PRIVATE = re.compile(r"\._now\b|\._value\b|\._ok\b|\._queue\b|\._eid\b|\._target\b"
                           r"|\._resume\b|_defused|simpy\.core|BoundClass")


def test_only_the_kernel_touches_simpys_internals():
    """Rule: SimPy's private names appear in ``model/kernel.py`` and nowhere else in the
    package, so a SimPy release is checked against one module (and this file)."""
    package = Path(herdsim.__file__).parent
    offenders = [f"{path.relative_to(package)}:{n}: {line.strip()}"
                 for path in sorted(package.rglob("*.py")) if path.name != "kernel.py"
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if SIMPY_PRIVATE.search(line)]
    assert offenders == []
