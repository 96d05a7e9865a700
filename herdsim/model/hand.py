"""The jobs in the workers' hands, remembering the job each caller process holds: what
a hash balancer hashes for a queue worker's call when the workload has keys
(``workload.keys``; :class:`~herdsim.model.downstream.fleet.Fleet`), and the class a
call's waiting room files it under (``workload.criticality``). Chosen at build time
for such a run only: any other run's hand is a plain ``set``."""

from __future__ import annotations

from typing import Any


class NotingHand(set):
    """A ``set`` of jobs whose ``add`` also notes the adding process's job in
    :attr:`jobs` (a worker takes a job in its own process) and whose ``discard`` drops
    it again."""

    def __init__(self, env) -> None:
        super().__init__()
        self.env = env
        self.jobs: dict[Any, Any] = {}  # a caller process -> the job it holds

    def add(self, job) -> None:
        super().add(job)
        proc = self.env.active_process
        if proc is not None:
            self.jobs[proc] = job

    def discard(self, job) -> None:
        super().discard(job)
        proc = self.env.active_process
        if proc is not None and self.jobs.get(proc) is job:
            del self.jobs[proc]


def hand(env, scenario) -> set:
    """The workers' hand of jobs: a :class:`NotingHand` when the workers' downstream has
    a hash balancer and the workload has keys, or the workload has criticality classes."""
    cfg, workload = scenario.downstream, scenario.workload
    keyed = getattr(cfg, "replicas", None) is not None and cfg.balancer is not None \
        and cfg.balancer.keyed and workload.keys is not None
    return NotingHand(env) if keyed or workload.criticality is not None else set()
