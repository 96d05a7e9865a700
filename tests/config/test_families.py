"""The families of outage modes, service distributions, arrival sources, autoscaler
metrics and downstream models: each member reads only its own fields (another member's
is an error naming the path and the kind), an unknown tag names the members, a tag left
out takes the family's default, every bundled scenario round-trips, and each member's
rule is the one both the model and the testbed use."""

from __future__ import annotations

import asyncio
import math
import re
import time
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import herdsim
from herdsim.cli import app
from herdsim.config.families import FAMILIES
from herdsim.config.loading import validate
from herdsim.config.scenario import Scenario
from herdsim.errors import ScenarioError
from herdsim.model.calls import ERROR, OK
from herdsim.model.simulation import _service_draws
from herdsim.model.streams import generators
from herdsim.policies import arrivals, autoscale, distributions, downstreams, outages
from herdsim.policies.outages import OutageState
from herdsim.testbed.emulator import Emulator, service_draws
from herdsim.testbed.timing import Clock

ROOT = Path(__file__).resolve().parents[2]
BUNDLED = sorted((ROOT / "herdsim" / "scenarios").glob("*.yaml"))
TRACE_TIMES = [i / 50 for i in range(100)]  # 50 jobs/s over 2 s


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("trace") / "t.csv"
    path.write_text("time\n" + "".join(f"{t}\n" for t in TRACE_TIMES))
    return str(path)


def _base() -> dict:
    return {"name": "fam", "duration": "2s", "workload": {"rate": 20},
            "workers": {"count": 5}, "downstream": {"timeout": "1s"}}


def _outage(doc: dict, section: dict) -> None:
    doc["downstream"]["outages"] = [{"start": "0.5s", "duration": "0.5s", **section}]
    if section.get("mode") == "flush":  # it acts on the tier's cache: one is there
        doc["downstream"]["cache"] = {"size": 5, "keys": {"distribution": "uniform",
                                                          "count": 10}}


def _service(doc: dict, section: dict) -> None:
    doc["downstream"]["service"] = {"mean": "10ms", **section}


def _workload(doc: dict, section: dict) -> None:
    doc["workload"] = {**({} if section.get("arrivals") == "trace" else {"rate": 20}),
                       **section}


def _autoscale(doc: dict, section: dict) -> None:
    doc["workers"]["autoscale"] = {"target": 0.5, "max": 10, "interval": "0.5s", **section}


def _downstream(doc: dict, section: dict) -> None:
    doc["downstream"].update(section)


# family -> (where its member's section sits, how to place one in a scenario)
PLACES = {
    outages.FAMILY: ("downstream.outages.0", _outage),
    distributions.FAMILY: ("downstream.service", _service),
    arrivals.FAMILY: ("workload", _workload),
    autoscale.FAMILY: ("workers.autoscale", _autoscale),
    downstreams.FAMILY: ("downstream", _downstream),
}


def _values(trace: str) -> dict:
    """A valid value of every member-owned field, for its owner."""
    return {"error_rate": 0.5, "factor": 2.0, "sigma": 1.0, "burst_size": 7,
            "trace": {"file": trace}, "occ": {"hop_mean": "5ms"},
            "broker": {"max_connections": 10},
            # periodic: clients / interval is _base's rate, 20 a second
            "clients": 20, "interval": "1s", "offset": "random", "restarts": ["1s"]}


def _own_fields(member) -> set[str]:
    """The fields *member* has and its family's base does not (its own)."""
    shared = set.intersection(*(set(m.model_fields) for m in member.family.members))
    return set(member.model_fields) - shared - {member.family.tag}


def _member_doc(member, trace: str) -> dict:
    """A valid section of *member*: its tag and its required own fields."""
    values = _values(trace)
    return {member.family.tag: member.name(),
            **{f: values[f] for f in _own_fields(member) if member.model_fields[f].is_required()}}


def _cases():
    for family in PLACES:
        for member in family.members:
            for other in family.members:
                for field in sorted(_own_fields(other) - set(member.model_fields)):
                    yield pytest.param(family, member, other, field,
                                       id=f"{family.tag}={member.name()}+{field}")


def test_every_family_of_this_file_is_listed():
    assert set(PLACES) <= set(FAMILIES)


@pytest.mark.parametrize("family, member, owner, field", list(_cases()))
def test_another_members_field_is_refused_naming_the_path_and_the_kind(
        trace_file, family, member, owner, field):
    where, place = PLACES[family]
    doc = _base()
    place(doc, {**_member_doc(member, trace_file), field: _values(trace_file)[field]})
    with pytest.raises(ScenarioError) as err:
        validate(doc)
    (path, message), = err.value.problems
    assert path == f"{where}.{field}"
    assert owner.name() in message and f"{family.tag}: {member.name()}" in message


@pytest.mark.parametrize("family, member", [(f, m) for f in PLACES for m in f.members],
                         ids=lambda v: getattr(v, "tag", None) or v.name())
def test_each_member_with_its_own_fields_is_valid(trace_file, family, member):
    where, place = PLACES[family]
    doc = _base()
    values = _values(trace_file)
    place(doc, {**_member_doc(member, trace_file),
                **{f: values[f] for f in _own_fields(member)}})
    scenario = validate(doc)
    section = scenario
    for part in where.split("."):
        section = section[int(part)] if part.isdigit() else getattr(section, part)
    assert getattr(section, family.tag) == member.name()


@pytest.mark.parametrize("family", list(PLACES), ids=lambda f: f.tag)
def test_an_unknown_tag_names_the_members(trace_file, family):
    where, place = PLACES[family]
    doc = _base()
    place(doc, {family.tag: "nope"})
    with pytest.raises(ScenarioError) as err:
        validate(doc)
    (path, message), = err.value.problems
    assert path == f"{where}.{family.tag}"
    assert "'nope'" in message and all(name in message for name in family.names())


@pytest.mark.parametrize("family", list(PLACES), ids=lambda f: f.tag)
def test_a_tag_left_out_is_the_default_member(family):
    """The docs' defaults: down, exponential, poisson, queue; an autoscaler has none."""
    where, place = PLACES[family]
    doc = _base()
    place(doc, {})
    if family.default is None:
        with pytest.raises(ScenarioError, match=f"{where}.{family.tag}: required"):
            validate(doc)
        return
    section = validate(doc)
    for part in where.split("."):
        section = section[int(part)] if part.isdigit() else getattr(section, part)
    assert getattr(section, family.tag) == family.default
    assert family.default == {"mode": "down", "distribution": "exponential",
                              "arrivals": "poisson", "model": "queue"}[family.tag]


def test_the_members_defaults_are_the_documented_ones():
    """docs/scenarios.md: error_rate 1.0, factor 5.0, sigma 0.5, 100 jobs per burst,
    occ's hops 10 ms ± 2 ms."""
    assert outages.FAMILY.member("error").model_fields["error_rate"].default == 1.0
    assert outages.FAMILY.member("slow").model_fields["factor"].default == 5.0
    assert distributions.FAMILY.member("lognormal").model_fields["sigma"].default == 0.5
    assert arrivals.Burst(arrivals="burst").jobs_per_arrival() == 100
    assert arrivals.Burst(arrivals="burst", burst_size=7).jobs_per_arrival() == 7
    assert {arrivals.FAMILY.member(n)(arrivals=n).jobs_per_arrival()
            for n in ("poisson", "constant")} == {1}
    occ = downstreams.Occ.fields(None)
    assert (occ.hop_mean, occ.hop_sd, occ.first_attempt) == (0.010, 0.002, 0)


@pytest.mark.parametrize("family", [arrivals.FAMILY, downstreams.FAMILY], ids=lambda f: f.tag)
def test_a_flat_familys_literal_is_its_members(family):
    """The tag of a family held flat in its section is a Literal written beside FAMILY."""
    package = {arrivals.FAMILY: arrivals, downstreams.FAMILY: downstreams}[family]
    assert list(typing.get_args(package.Name)) == family.names()


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.name)
def test_every_bundled_scenario_round_trips(path):
    scenario = herdsim.load_scenario(path)
    assert Scenario.model_validate(scenario.model_dump()) == scenario
    assert validate(yaml.safe_load(scenario.to_yaml())) == scenario


def test_an_older_dump_with_every_members_fields_is_read_from_a_run_folder_only():
    """Older herdsim sealed every mode's fields with their defaults (factor on a down
    outage, sigma on an exponential service, burst_size with Poisson, occ with the
    queue): a run folder's scenario (read sealed) drops them; a scenario file the user
    writes is refused, also by ``herdsim validate`` (which reads with trust_code off)."""
    old = _base()
    old["workload"].update(arrivals="poisson", burst_size=100)
    old["downstream"].update(
        model="queue", occ={"hop_mean": 0.01, "hop_sd": 0.002, "first_attempt": 0},
        service={"distribution": "exponential", "mean": 0.01, "sigma": 0.5},
        outages=[{"start": 0.5, "duration": 0.5, "mode": "down", "error_rate": 1.0,
                  "factor": 5.0}])
    for trust_code in (True, False):
        with pytest.raises(ScenarioError):
            validate(old, trust_code=trust_code)
    clean = _base()
    clean["downstream"].update(service={"mean": 0.01},
                               outages=[{"start": 0.5, "duration": 0.5}])
    assert validate(old, trust_code=False, sealed=True) == validate(clean)


def test_herdsim_validate_refuses_another_kinds_field_in_one_line(tmp_path):
    doc = _base()
    _outage(doc, {"factor": 3})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "s.yaml")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {tmp_path / 's.yaml'}: downstream.outages.0.factor: only a slow outage "
        "has factor (this one is mode: down)"]


# -- the rules ---------------------------------------------------------------------------

holding = st.lists(st.one_of(
    st.builds(outages.FAMILY.member("error"), mode=st.just("error"), start=st.just(0),
              duration=st.just(1), error_rate=st.floats(0.01, 1.0)),
    st.builds(outages.FAMILY.member("slow"), mode=st.just("slow"), start=st.just(0),
              duration=st.just(1), factor=st.floats(0.1, 20.0)),
    st.builds(outages.FAMILY.member("down"), start=st.just(0), duration=st.just(1)),
    st.builds(outages.FAMILY.member("blackhole"), mode=st.just("blackhole"),
              start=st.just(0), duration=st.just(1))), max_size=6)


@given(holding, st.randoms(use_true_random=False))
def test_outages_combine_as_independent_failures_and_multiplied_slowdowns(begun, rnd):
    """While a set of outages holds: a call fails with 1 − Π(1 − error_rate), its service
    is Π factor longer, down and blackhole count theirs; when all have ended (in any
    order), the state is the healthy one again."""
    state = OutageState()
    for outage in begun:
        outage.begin(state)
    state.refresh()
    rates = [o.error_rate for o in begun if o.mode == "error"]
    factors = [o.factor for o in begun if o.mode == "slow"]
    assert math.isclose(state.error_rate, 1 - math.prod(1 - r for r in rates), abs_tol=1e-12)
    assert math.isclose(state.slow, math.prod(factors), rel_tol=1e-12)
    assert state.down == sum(o.refuses for o in begun)
    assert state.blackhole == sum(o.needs_timeout for o in begun)
    for outage in rnd.sample(begun, len(begun)):
        outage.cease(state)
    state.refresh()
    assert (state.down, state.blackhole, state.error_rate, state.slow) == (0, 0, 0.0, 1.0)


@pytest.mark.parametrize("name", distributions.FAMILY.names())
def test_a_distributions_sampler_has_its_mean(name):
    """200,000 draws of mean 10 ms: within 5 standard errors of it (exponential: sd =
    mean; lognormal sigma 1: sd = mean·√(e − 1)); a lognormal's median is
    mean·e^(−sigma²/2), within 2%."""
    fields = {"sigma": 1.0} if name == "lognormal" else {}
    member = distributions.FAMILY.member(name)(distribution=name, mean=0.01, **fields)
    times = member.sampler(np.random.default_rng(3))(200_000)
    sd = {"constant": 0.0, "exponential": 0.01, "lognormal": 0.01 * math.sqrt(math.e - 1)}
    assert abs(times.mean() - 0.01) <= 5 * sd[name] / math.sqrt(len(times)) + 1e-15
    if name == "lognormal":
        assert np.median(times) == pytest.approx(0.01 * math.exp(-0.5), rel=0.02)


@pytest.mark.parametrize("section", [{"distribution": "constant", "mean": "20ms"},
                                     {"mean": "20ms"},
                                     {"distribution": "lognormal", "mean": "20ms",
                                      "sigma": 1.5}])
def test_the_model_and_the_testbed_draw_the_same_service_times(section):
    """Both ask the member: the simulation's draws and the emulator's, from the same
    seed, are the same numbers."""
    doc = _base()
    doc["downstream"]["service"] = section
    scenario = validate(doc)
    model = _service_draws(scenario.downstream.service, generators(scenario.seed)["service"])
    testbed = service_draws(scenario)
    assert [model() for _ in range(1000)] == [testbed() for _ in range(1000)]


def test_the_testbeds_emulator_keeps_error_and_slow_outages_by_their_rule():
    """A slow outage (factor 3) and an error outage (error_rate 1) over [0, 0.5 s): a
    constant 100 ms service takes 300 ms and fails; after them, 100 ms and served.
    (Wall-clock: LATE allows for a loaded machine.)"""
    late = 0.15
    doc = _base()
    doc["downstream"] = {"concurrency": 2, "service": {"distribution": "constant",
                                                       "mean": "100ms"},
                         "outages": [{"start": 0, "duration": "0.5s", "mode": "slow",
                                      "factor": 3},
                                     {"start": 0, "duration": "0.5s", "mode": "error",
                                      "error_rate": 1.0}]}
    scenario = validate(doc)

    async def calls():
        clock = Clock(0.0)
        emulator = Emulator(scenario, clock)
        clock.t0 = time.monotonic()
        emulator.start()
        answers = []
        for at in (0.01, 0.6):
            await clock.sleep_until(at)
            start = clock.now()
            outcome, _ = await emulator.call()
            answers.append((outcome, clock.now() - start))
        return answers

    (during, took_during), (after, took_after) = asyncio.run(calls())
    assert during == ERROR and 0.3 <= took_during <= 0.3 + late
    assert after == OK and 0.1 <= took_after <= 0.1 + late


def test_a_rate_beside_a_trace_is_refused_unless_it_is_the_traces_mean(trace_file):
    """The issue's case: workload.rate 5000 beside a trace ran the trace and judged
    goodput against 5000. The trace's mean over the run (100 arrivals in 2 s) is the
    rate; written back (as a dump is), it is accepted."""
    doc = _base()
    doc["workload"] = {"arrivals": "trace", "trace": {"file": trace_file}, "rate": 5000}
    with pytest.raises(ScenarioError) as err:
        validate(doc)
    (path, message), = err.value.problems
    assert path == "workload.rate" and "trace" in message
    doc["workload"]["rate"] = len(TRACE_TIMES) / 2.0
    assert validate(doc).workload.rate == len(TRACE_TIMES) / 2.0


def test_a_rate_beside_a_profile_is_its_first_step_or_an_error():
    doc = _base()
    doc["workload"] = {"rate": 30, "profile": [{"at": 0, "rate": 20}, {"at": 1, "rate": 40}]}
    with pytest.raises(ScenarioError, match=r"workload\.rate: .*profile"):
        validate(doc)
    doc["workload"]["rate"] = 20
    assert validate(doc).workload.rate == 20
    del doc["workload"]["rate"]
    assert validate(doc).workload.rate == 20


def test_busy_fraction_alone_bounds_its_target():
    """A target above 1 is a busy fraction no pool reaches; for queue_depth it is jobs."""
    doc = _base()
    _autoscale(doc, {"metric": "busy_fraction", "target": 2})
    with pytest.raises(ScenarioError, match=r"workers\.autoscale\.target: busy_fraction"):
        validate(doc)
    doc = _base()
    _autoscale(doc, {"metric": "queue_depth", "target": 2})
    assert validate(doc).workers.autoscale.target == 2


def test_an_occ_run_without_its_section_takes_the_defaults():
    """``occ`` left out is ``occ: {}``: the same run, frame for frame."""
    doc = {"name": "occ", "duration": "5s", "workers": {"count": 20},
           "workload": {"rate": 1}, "downstream": {"model": "occ"}}
    bare = herdsim.run(validate(doc))
    doc["downstream"]["occ"] = {}
    written = herdsim.run(validate(doc))
    assert bare.timeseries.equals(written.timeseries)
    assert bare.jobs.equals(written.jobs)


FAMILIES_HERE = (outages.FAMILY, distributions.FAMILY, arrivals.FAMILY, autoscale.FAMILY,
                 downstreams.FAMILY)
TAGS = "|".join(f.tag for f in FAMILIES_HERE)
NAMES = "|".join(n for f in FAMILIES_HERE for n in f.names())
SWITCH = re.compile(rf"""\.({TAGS})\s*[!=]=\s*["']({NAMES})["']|[!=]=\s*["']occ["']""")


def test_no_module_switches_on_these_members_names():
    """The engine, analysis and plots ask the member (its rule, its declarations)."""
    found = [f"{path.relative_to(ROOT)}:{n}" for path in (ROOT / "herdsim").rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if SWITCH.search(line)]
    assert not found
