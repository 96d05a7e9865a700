"""The testbed: the scenario run for real, to hold the simulation to it.

Real processes driven by the same validated scenario: a ``redis-server`` holding the main
queue, the delayed set and the DLQ; the downstream emulated by an asyncio HTTP server
(:mod:`herdsim.testbed.server`, also ``herdsim serve``); a producer pushing jobs at the
workload's rate; worker processes retrying with herdsim's own strategy, breaker and budget
objects (a pool's one breaker or budget shared through Redis, :mod:`herdsim.testbed.shared`).
What they log becomes the output directory of ``herdsim run`` (:mod:`herdsim.testbed.run`);
``--prometheus`` has a real Prometheus scrape them (:mod:`herdsim.testbed.live`). The model
never imports this room.
"""
