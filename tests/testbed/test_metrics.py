"""The live testbed's ``/metrics`` serve every metric the dashboard's panels query:
the emulated downstream, the worker processes and the producer together, under the
names ``herdsim export prometheus`` writes, each labelled ``queue``."""

from __future__ import annotations

import json
import re
from array import array
from pathlib import Path
from types import SimpleNamespace

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from herdsim.config.loading import load_scenario
from herdsim.testbed.emulator import OUTCOME_NAMES, Emulator
from herdsim.testbed.metrics import ProducerCollector, WorkerCollector
from herdsim.testbed.server import _Collector
from herdsim.testbed.timing import Clock

ROOT = Path(__file__).parents[2]


def dashboard_metrics() -> set[str]:
    """The metric names the dashboard's queries read (herdsim's own prefixes)."""
    exprs = [t["expr"] for panel in json.loads(
        (ROOT / "dashboards" / "herdsim.json").read_text())["panels"]
        for t in panel.get("targets", [])]
    return {m for e in exprs for m in re.findall(r"\b(?:worker|downstream)_[a-z_]+\b", e)}


def served(collector) -> list:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(collector)
    return [s for family in text_string_to_metric_families(
        generate_latest(registry).decode()) for s in family.samples]


def test_every_metric_the_dashboard_reads_is_served_by_a_testbed_process():
    sc = load_scenario(ROOT / "scenarios" / "testbed.yaml", {"breaker.enabled": True})
    events = {name: array("d") for name in ("recycled", "budget_refused", "short_circuited",
                                            "arrivals", "refused")}
    pool = SimpleNamespace(finished={"outcome": array("d")}, sleeps={"sleep": array("d")},
                           log=events, calls=dict.fromkeys(OUTCOME_NAMES.values(), 0),
                           in_flight=0, sleeping=0, breaker_open=lambda: 0.0)
    producer = SimpleNamespace(log={**events, "queue_depth": [3], "delayed": [1]},
                               dlq_depth=[0])
    queue = sc.queue or sc.name
    samples = [*served(_Collector(Emulator(sc, Clock(0.0)))),
               *served(WorkerCollector(pool, queue)), *served(ProducerCollector(producer, queue))]
    names = {s.name for s in samples}
    wanted = dashboard_metrics()
    assert wanted and "downstream_calls_total" in wanted
    assert wanted <= names, sorted(wanted - names)
    assert {s.labels.get("queue") for s in samples} == {queue}
