"""What every arrival source declares: how the gaps between arrivals are drawn and how
many jobs each arrival brings. The rate (``workload.rate``, a profile's steps, spikes) is
the workload's; a trace brings its own times."""

from __future__ import annotations

from typing import ClassVar

from herdsim.policies.family import Member


class Source(Member):
    """An arrival source (``workload.arrivals``); its fields sit flat in ``workload``."""

    poisson: ClassVar[bool] = False  # gaps are unit exponentials over the rate (else fixed)
    emulated: ClassVar[bool] = True  # the testbed's producer runs the model's own clock
    knob: ClassVar[str] = "lower workload.rate"  # how a user makes fewer jobs arrive

    def jobs_per_arrival(self) -> int:
        """Jobs that arrive together at each arrival time."""
        return 1

    def together(self) -> int:
        """The most jobs the source brings in one instant by design (a burst, clients in
        step): a queue of them is the workload's own, not a backlog."""
        return self.jobs_per_arrival()

    def jobs_within(self, seconds: float) -> float | None:
        """Jobs arriving in [0, *seconds*) when the source sets its own count (None: the
        workload's rate, profile and spikes say)."""
        return None
