"""Memory: a backlog waits as ids, not ``Job`` objects, and the jobs frame takes the
recorder's finish rows over (``benchmarks/engine.py`` measures the peak at 100,000 workers)."""

from __future__ import annotations

from pathlib import Path

import pytest

import herdsim
from herdsim.model.simulation import Simulation
from herdsim.results.result import Result


def outage_run():
    """A small outage whose backlog is still queued at the end."""
    path = Path(herdsim.__file__).parent / "scenarios" / "outage.yaml"
    sc = herdsim.load_scenario(path, {"duration": "30s"})
    sim = Simulation(sc)
    return sim, sim.run()


@pytest.mark.slow
def test_a_backlog_waits_as_ids_and_its_jobs_are_made_when_asked_for():
    """The finished record leaves out the jobs still queued as they arrived (they made no
    attempt); the simulation still lists every pending job, and the frame agrees."""
    sim, run = outage_run()
    every, taken = sim.pending_jobs(), set(run.pending)
    assert len(taken) < len(every)
    assert all(job.attempts == 0 and not job.poison for job in every if job not in taken)
    jobs = Result.from_finished(run).jobs
    pending = jobs[jobs["outcome"] == "pending"]
    assert sorted(job.id for job in every) == sorted(pending["job"])
    by_id = dict(zip(pending["job"], pending["attempts"], strict=True))
    assert all(by_id[job.id] == job.attempts for job in every)


@pytest.mark.slow
def test_the_finish_rows_go_to_one_jobs_frame():
    """A second frame from the same record would count every job pending: it raises."""
    sim, run = outage_run()
    Result.from_finished(run)
    assert len(sim.recorder.finish_id) == 0
    with pytest.raises(RuntimeError, match="earlier jobs frame"):
        sim.recorder.jobs(run.pending)
