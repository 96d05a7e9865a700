"""The families converted from the scenario's flat sections (issue 35): retry budgets, the
circuit breaker, the client limiter, the waiting-room discipline, CoDel, shedding, and
the backoff strategies' registry.

For each family: every member refuses a field another member reads, naming the field's
path and the member that reads it; an unknown tag names the members; a member's defaults
are the ones its library ships (the docs table's); every bundled scenario survives a
dump and a load. Then the members' rules against their definitions, and the engine's
reading of the discipline once per run.
"""

from __future__ import annotations

import typing
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import SCENARIOS, tiny
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter

import herdsim
from herdsim.config.scenario import Scenario
from herdsim.config.sections import Downstream
from herdsim.errors import ScenarioError
from herdsim.policies import adaptive, backoff, breaker, budgets, codel, disciplines, shedding
from herdsim.policies.backoff import registry
from herdsim.policies.windows import TIME_BUCKETS

CASES_DIR = Path(__file__).resolve().parents[1] / "cases"  # tests/cases
# (family, where its member sits, a valid section of each member)
SECTIONS = [
    (budgets.FAMILY, "budget", {"token_bucket": {"kind": "token_bucket", "preset": "aws"},
                                "adaptive": {"kind": "adaptive"},
                                "ratio": {"kind": "ratio"},
                                "cumulative_ratio": {"kind": "cumulative_ratio"}}),
    (breaker.FAMILY, "breaker", {"resilience4j": {"enabled": True}}),
    (adaptive.FAMILY, "client_limiter", {"aws_adaptive": {}}),
    (codel.FAMILY, "downstream.codel", {"facebook": {}}),
    (shedding.FAMILY, "downstream.shedding", {"probabilistic": {"above": 3,
                                                                "probability": 0.5}}),
]
ROOMS = {"fifo": {}, "lifo": {"discipline": "lifo"},
         "adaptive_lifo": {"discipline": "adaptive_lifo", "lifo_threshold": 4}}


def _at(path: str, section: dict) -> dict:
    """A tiny scenario with *section* at the dotted *path*."""
    *above, last = path.split(".")
    spec = tiny()
    node = spec
    for part in above:
        node = node.setdefault(part, {})
    node[last] = section
    return spec


def _problem(spec: dict) -> str:
    with pytest.raises(ScenarioError) as caught:
        herdsim.load_scenario(spec)
    return str(caught.value)


FOREIGN = [pytest.param(family, path, section, name, field, id=f"{path}-{name}-{field}")
           for family, path, members in SECTIONS for name, section in members.items()
           for field in family.fields.model_fields
           if field not in family.member(name).model_fields]


def test_every_family_with_several_members_has_foreign_fields_to_refuse():
    assert {p.values[0].name for p in FOREIGN} == {"retry budget"}


@pytest.mark.parametrize(("family", "path", "section", "name", "field"), FOREIGN)
def test_a_field_another_member_reads_is_refused_naming_it(family, path, section, name,
                                                           field):
    """Set to a value its own member would accept (its default, or 1), the field is still
    refused on this member, at its path, naming the member(s) that read it."""
    owners = [m for m in family.members if field in m.model_fields]
    default = owners[0].model_fields[field].default
    message = _problem(_at(path, {**section, field: 1 if default is None else default}))
    assert f"{path}.{field}: only " in message
    assert all(owner.name() in message for owner in owners)
    assert f"(this one is {family.tag}: {name})" in message


@pytest.mark.parametrize(("name", "field"), [("fifo", "lifo_threshold"),
                                             ("lifo", "lifo_threshold")])
def test_a_room_refuses_the_threshold_only_adaptive_lifo_reads(name, field):
    message = _problem(_at("downstream", {**ROOMS[name], "discipline": name, field: 4}))
    assert message.endswith(f"downstream.{field}: only an adaptive_lifo waiting room has "
                            f"{field} (this one is discipline: {name})")


def test_adaptive_lifo_needs_its_threshold():
    message = _problem(_at("downstream", {"discipline": "adaptive_lifo"}))
    assert "downstream.lifo_threshold: is required by discipline: adaptive_lifo" in message


def test_an_edge_s_budget_and_breaker_are_members_too():
    """A call graph's edge holds the same families, refused at the edge's path."""
    doc = yaml.safe_load((CASES_DIR / "zero_rtt.yaml").read_text())
    edge = doc["downstream"]["calls"][0]
    edge["budget"] = {"kind": "ratio", "capacity": 3}
    assert _problem(doc).endswith("downstream.calls.0.budget.capacity: only a token_bucket "
                                  "retry budget has capacity (this one is kind: ratio)")
    edge["budget"], edge["breaker"]["kind"] = {"kind": "ratio"}, "polly"
    assert "downstream.calls.0.breaker.kind: unknown kind 'polly'" in _problem(doc)


def test_null_for_a_sibling_s_field_is_unset():
    """Older herdsim dumps wrote every field of the flat section, null when unset."""
    sc = herdsim.load_scenario(_at("budget", {"kind": "adaptive", "preset": None,
                                              "capacity": None, "credit_on": None}))
    assert sc.budget.kind == "adaptive"


@pytest.mark.parametrize(("family", "path"), [(f, p) for f, p, _ in SECTIONS])
def test_an_unknown_tag_names_the_members(family, path):
    message = _problem(_at(path, {family.tag: "nope"}))
    assert f"{path}.{family.tag}: unknown {family.tag} 'nope': one of " \
           + ", ".join(family.names()) in message


def test_the_downstream_offers_every_discipline_member():
    """``discipline`` stays a flat field of the downstream: its choices are the family's."""
    field = Downstream.model_fields["discipline"]
    assert typing.get_args(field.annotation) == tuple(disciplines.FAMILY.names())
    assert field.default == disciplines.FAMILY.default


def test_an_unknown_discipline_names_the_members():
    message = _problem(_at("downstream", {"discipline": "nope"}))
    assert "downstream.discipline" in message
    assert all(name in message for name in disciplines.FAMILY.names())


@pytest.mark.parametrize(("family", "path", "members"), SECTIONS)
def test_a_default_tag_may_be_left_out(family, path, members):
    """The one-member families (and only they) choose their member without the tag."""
    name, section = next(iter(members.items()))
    section = {k: v for k, v in section.items() if k != family.tag}
    if family.default is None:
        assert "required field is missing" in _problem(_at(path, section))
        return
    sc = herdsim.load_scenario(_at(path, section))
    chosen = eval(f"sc.{path}", {"sc": sc})  # noqa: S307 (a dotted path of this test's)
    assert type(chosen).name() == family.default == name


def test_budget_defaults_are_the_libraries():
    """Google SRE, "Handling Overload": K = 2 over the last two minutes; Finagle's
    RetryBudget: ttl 10 s, 20% of requests, 10 retries/s minimum; the original retry
    simulator's retry breaker: ratio 0.1 (CircuitBreakerRetryFactory(..., 0.1))."""
    read = TypeAdapter(budgets.Budget).validate_python
    sre = read({"kind": "adaptive"}).build(lambda: 0.5)
    assert (sre.window.width * TIME_BUCKETS, sre.k) == (120.0, 2.0)
    finagle = read({"kind": "ratio"}).build(lambda: 0.5)
    assert (finagle.window.width * TIME_BUCKETS, finagle.ratio, finagle.reserve) == \
        (10.0, 0.2, 10 * 10.0)
    assert read({"kind": "cumulative_ratio"}).build(lambda: 0.5).ratio == 0.1


BUNDLED = sorted(SCENARIOS.glob("*.yaml"))
CASES = sorted(CASES_DIR.glob("*.yaml"))


@pytest.mark.parametrize("path", BUNDLED + CASES, ids=lambda p: p.name)
def test_every_bundled_scenario_survives_its_dump(path):
    """Its dump (every member's own fields, tags included) validates back to the same
    scenario (bundled ones; a call graph's dump keeps the retry of an edge that hedges,
    which only the written form leaves out), and so does the YAML an output directory
    holds."""
    sc = herdsim.load_scenario(path)
    if path in BUNDLED:
        assert Scenario.model_validate(sc.model_dump()).model_dump() == sc.model_dump()
    written = yaml.safe_load(sc.to_yaml())
    assert herdsim.load_scenario(written).model_dump() == sc.model_dump()


# -- the rules --------------------------------------------------------------------------------


@given(depth=st.integers(0, 10_000), threshold=st.integers(1, 10_000))
def test_a_room_serves_the_newest_as_its_definition_says(depth, threshold):
    read = disciplines.FAMILY.member
    assert read("fifo")().newest(depth) is False
    assert read("lifo")(discipline="lifo").newest(depth) is True
    room = read("adaptive_lifo")(discipline="adaptive_lifo", lifo_threshold=threshold)
    assert room.newest(depth) is (depth >= threshold)
    assert [m.always for m in disciplines.FAMILY.members] == [False, True, None]


@given(waited=st.floats(0, 1), standing=st.floats(0, 1))
def test_codel_drops_a_long_wait_in_a_standing_room(waited, standing):
    rule = codel.Facebook(target=0.005, interval=0.1)
    assert rule.drops(waited, standing) is (waited > 0.005 and standing >= 0.1)


@given(depth=st.integers(0, 20), u=st.floats(0, 1, exclude_max=True))
def test_shedding_draws_only_beyond_its_depth(depth, u):
    drawn = []
    rule = shedding.Probabilistic(above=5, probability=0.3)
    shed = rule.sheds(depth, lambda: drawn.append(u) or u)
    assert len(drawn) == (depth >= 5)
    assert shed is (depth >= 5 and u >= 0.3)


def test_a_room_that_always_serves_one_end_asks_nothing_per_call(monkeypatch):
    """The engine reads ``always`` once: a FIFO room behind CoDel never asks the member
    which end to serve, an adaptive LIFO room asks at every pick."""
    asked = []
    rule = disciplines.AdaptiveLifo.newest
    for member in disciplines.FAMILY.members:
        monkeypatch.setattr(member, "newest", lambda self, depth: asked.append(depth) or (
            rule(self, depth) if self.always is None else bool(self.always)))
    down = {"concurrency": 2, "queue_limit": 50, "codel": {"target": "1s"},
            "outages": [{"start": "500ms", "duration": "200ms", "mode": "down"}]}
    herdsim.run(herdsim.load_scenario(tiny(downstream=down)))
    assert asked == []
    herdsim.run(herdsim.load_scenario(tiny(downstream={
        **down, "discipline": "adaptive_lifo", "lifo_threshold": 3})))
    assert asked


def test_the_backoff_registry_lists_every_own_strategy_with_its_declarations():
    names = backoff.FAMILY.names()
    assert names == [*backoff.BUILT_IN, *backoff.LIBRARY]
    for name in names:
        member = backoff.FAMILY.member(name)
        assert registry.resolve(name) is member and member.formula
    rows = {row[0]: row for row in backoff.FAMILY.rows()}
    assert rows["decorrelated_jitter"][4] == "none"  # a chain on the previous sleep


@pytest.mark.parametrize("name", ["fixed", "exponential", "full_jitter", "equal_jitter",
                                  "proportional_jitter"])
def test_a_fluid_form_is_the_sleep_s_distribution(name):
    """The fluid form's support: a delta at min(cap, base·2^n), or a uniform on the
    interval it names, checked against 20,000 draws at retry n = 3."""
    base, cap, n = 0.1, 30.0, 3
    strategy = registry.build(name, base, cap)
    rng = np.random.default_rng(5)
    draws = np.array([strategy.sleep(n, base, rng) for _ in range(20_000)])
    v = min(cap, base * 2**n)
    low, high = {"fixed": (base, base), "exponential": (v, v), "full_jitter": (0, v),
                 "equal_jitter": (v / 2, v), "proportional_jitter": (0.8 * v, 1.2 * v)}[name]
    assert ("delta" in strategy.fluid) == (low == high)
    assert draws.min() >= low and draws.max() <= high
    if low < high:  # uniform: the mean in the middle, within 5 standard errors
        assert abs(draws.mean() - (low + high) / 2) < 5 * (high - low) / 12**0.5 / 20_000**0.5
