"""The jobs in the workers' hands, remembering the key of the job each caller process
holds: what a hash balancer hashes for a queue worker's call when the workload has keys
(``workload.keys``; :class:`~herdsim.model.downstream.fleet.Fleet`). Chosen at build
time for such a run only: any other run's hand is a plain ``set``."""

from __future__ import annotations

from typing import Any


class KeyedHand(set):
    """A ``set`` of jobs whose ``add`` also notes the adding process's job key in
    :attr:`keys` (a worker takes a job in its own process) and whose ``discard`` drops
    it again."""

    def __init__(self, env) -> None:
        super().__init__()
        self.env = env
        self.keys: dict[Any, int] = {}  # a caller process -> the key of the job it holds
        self._held: dict[Any, Any] = {}

    def add(self, job) -> None:
        super().add(job)
        proc = self.env.active_process
        if proc is not None:
            self.keys[proc] = job.key
            self._held[proc] = job

    def discard(self, job) -> None:
        super().discard(job)
        proc = self.env.active_process
        if proc is not None and self._held.get(proc) is job:
            del self.keys[proc], self._held[proc]
