"""Small scenarios drawn by Hypothesis (<= 5 s, <= 60 workers or open-loop callers)
across every strategy, retry mode, outage mode, overload knob, breaker and budget: what
``tests/model/test_conservation.py`` recounts job by job, and other mechanism tests reuse."""

from __future__ import annotations

from hypothesis import strategies as st

from herdsim.policies.backoff import BUILT_IN

durations = st.floats(0.5, 5.0)


small_times = st.floats(0.001, 0.2)


def maybe(strategy):
    return st.none() | strategy


@st.composite
def outages(draw, duration: float, bin_width: float) -> dict:
    """An outage anywhere in the run, possibly ending with it."""
    start = draw(st.floats(0.0, duration - 0.02))
    length = draw(st.floats(0.01, duration - start))
    outage = {"start": start, "duration": length,
              "mode": draw(st.sampled_from(["down", "blackhole", "error", "slow"]))}
    if outage["mode"] == "error":
        outage["error_rate"] = draw(st.floats(0.05, 1.0))
    if outage["mode"] == "slow":
        outage["factor"] = draw(st.floats(0.2, 10.0))
    return outage


@st.composite
def collapses(draw) -> dict:
    threshold = draw(maybe(st.integers(1, 60)))
    load_limit = draw(st.integers(1, 40) if threshold is None else maybe(st.integers(1, 40)))
    return {"window": draw(st.floats(0.01, 0.5)), "threshold": threshold,
            "load_limit": load_limit, "restart_time": draw(st.floats(0.05, 2.0))}


@st.composite
def breakers(draw, scope: str) -> dict:
    return {"enabled": True, "scope": scope, "retries_only": draw(st.booleans()),
            "failure_rate_threshold": draw(st.floats(0.1, 1.0)),
            "window": draw(st.floats(0.1, 2.0)), "minimum_calls": draw(st.integers(1, 10)),
            "open_duration": draw(st.floats(0.05, 1.0)),
            "half_open_calls": draw(st.integers(1, 3))}


@st.composite
def budgets(draw, scope: str) -> dict:
    kind = draw(st.sampled_from(["token_bucket", "adaptive", "ratio"]))
    budget = {"kind": kind, "scope": scope}
    if kind == "token_bucket":
        budget["preset"] = draw(st.sampled_from(["aws", "aws-1.43", "grpc"]))
    else:  # a token bucket has no window
        budget["window"] = draw(st.floats(0.1, 2.0))
    return budget


@st.composite
def defences(draw) -> dict:
    """A downstream's defences (herdsim.model.downstream.defences), or none."""
    fields: dict = {}
    discipline = draw(st.sampled_from(["fifo", "fifo", "lifo", "adaptive_lifo"]))
    fields["discipline"] = discipline
    if discipline == "adaptive_lifo":
        fields["lifo_threshold"] = draw(st.integers(1, 10))
    if draw(st.booleans()):
        fields["codel"] = {"target": draw(st.floats(0.001, 0.1)),
                           "interval": draw(st.floats(0.01, 0.5))}
    if draw(st.booleans()):
        fields["shedding"] = {"above": draw(st.integers(0, 10)),
                              "probability": draw(st.floats(0.0, 1.0))}
    kind = draw(st.sampled_from([None, "fixed", "aimd", "vegas", "gradient2", "envoy"]))
    if kind is not None:
        admission = {"kind": kind, "status": draw(st.sampled_from([503, 429]))}
        if kind == "fixed":
            admission["limit"] = draw(st.integers(1, 30))
        if kind == "envoy":
            admission["interval"] = draw(st.floats(0.01, 0.5))
            admission["min_rtt_interval"] = draw(st.floats(0.1, 3.0))
            admission["request_count"] = draw(st.integers(1, 20))
        fields["admission"] = admission
    return fields


@st.composite
def scenarios(draw) -> dict:
    """A valid small scenario dict. ``retry.base`` >= 10 ms keeps a job below ~500
    retries in 5 s, so every example runs in well under a second."""
    duration = draw(durations)
    bin_width = draw(st.sampled_from([0.05, 0.1, 0.25]))
    base = draw(st.floats(0.01, 0.5))
    outage_list = draw(st.lists(outages(duration, bin_width), max_size=3))
    timeout = draw(maybe(st.floats(0.005, 0.5)))
    if timeout is None and any(o["mode"] == "blackhole" for o in outage_list):
        timeout = draw(st.floats(0.005, 0.5))
    open_loop = draw(st.integers(0, 5)) == 0  # workers.count: null, a caller per job
    scope = "pool" if open_loop else draw(st.sampled_from(["worker", "pool"]))
    n_spikes = draw(st.integers(0, 2))
    edges = sorted(draw(st.lists(st.floats(0.0, duration * 0.9), min_size=2 * n_spikes,
                                 max_size=2 * n_spikes, unique=True)))
    spikes = [{"at": at, "duration": end - at, "rate": draw(st.floats(1.0, 400.0))}
              for at, end in zip(edges[::2], edges[1::2], strict=True)]
    count = None if open_loop else draw(st.integers(1, 60))
    steps = draw(st.integers(0, 3)) if draw(st.integers(0, 3)) == 0 else 0
    ats = sorted(draw(st.lists(st.floats(0.01, duration), min_size=steps, max_size=steps,
                               unique=True)))
    rate = draw(st.floats(1.0, 300.0))
    profile = [{"at": 0, "rate": rate}]  # a profile's first step is the rate
    for i, at in enumerate(ats):
        room = (ats[i + 1] if i + 1 < len(ats) else duration) - at
        profile.append({"at": at, "rate": draw(st.floats(0.0, 300.0)),
                        "ramp": draw(st.floats(0.0, room))})
    arrivals = draw(st.sampled_from(["poisson", "constant", "burst"]))
    autoscale = None
    if count is not None and draw(st.integers(0, 3)) == 0:
        autoscale = {"metric": draw(st.sampled_from(["queue_depth", "busy_fraction"])),
                     "target": draw(st.floats(0.1, 1.0)), "min": 1, "max": count + 20,
                     "interval": draw(st.floats(0.05, 1.0)),
                     "step_limit": draw(maybe(st.integers(1, 10))),
                     "cooldown": draw(st.floats(0.0, 1.0))}
    return {
        "name": "prop",
        "seed": draw(st.integers(0, 2**32 - 1)),
        "duration": duration,
        "bin": bin_width,
        "workload": {
            "arrivals": arrivals,
            "rate": rate,
            **({"burst_size": draw(st.integers(1, 40))} if arrivals == "burst" else {}),
            "backlog": draw(st.integers(0, 80)),
            "poison_fraction": draw(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0])),
            "queue_limit": draw(maybe(st.integers(1, 60))),
            "spikes": spikes,
            "profile": profile if steps else [],
            "keys": None if count is None else draw(maybe(st.integers(1, 30))),
        },
        "workers": {
            "count": count,
            "autoscale": autoscale,
            "retry_mode": "sleep" if open_loop else draw(st.sampled_from(["sleep", "requeue"])),
            "poll_interval": draw(st.floats(0.01, 1.0)),
        },
        "downstream": {
            "concurrency": draw(st.integers(1, 20)),
            "queue_limit": draw(maybe(st.integers(0, 20))),
            "service": {
                "distribution": draw(st.sampled_from(["constant", "exponential", "lognormal"])),
                "mean": draw(small_times),
            },
            "timeout": timeout,
            "network_delay": draw(maybe(st.fixed_dictionaries({
                "distribution": st.sampled_from(["constant", "exponential"]),
                "mean": st.floats(0.0005, 0.05)}))),
            "serve_abandoned": draw(st.booleans()),
            "rate_limit": draw(maybe(st.fixed_dictionaries({
                "rate": st.floats(5.0, 500.0), "burst": st.floats(1.0, 50.0)}))),
            "outages": outage_list,
            "overload": {
                "collapse": draw(maybe(collapses())),
                "latency_per_call": draw(st.sampled_from([0.0, 0.0, 0.001, 0.005])),
                "latency_model": draw(st.sampled_from(["at_start", "continuous"])),
            },
            **(draw(defences()) if draw(st.booleans()) else {}),
        },
        "retry": {
            "strategy": draw(st.sampled_from(sorted(BUILT_IN))),
            "base": base,
            "cap": base * draw(st.floats(1.0, 100.0)),
            "max_retries": draw(maybe(st.integers(0, 6))),
            "poison_retryable": draw(st.booleans()),
            "throttling": draw(st.lists(st.sampled_from([429, 503]), unique=True)),
            **({"retry_on": draw(st.lists(st.sampled_from(["timeout", "reset", 500, 503, 429]),
                                          unique=True))} if draw(st.integers(0, 3)) == 0 else {}),
            "bucket": draw(maybe(st.fixed_dictionaries({
                "rate": st.floats(1.0, 100.0), "burst": st.integers(1, 20)}))),
        },
        "client_limiter": draw(maybe(st.fixed_dictionaries({"kind": st.just("aws_adaptive"),
                                                            "scope": st.just(scope)}))),
        "dlq": {"enabled": draw(st.booleans()),
                "redelivery_delay": draw(st.floats(0.01, 1.0))},
        "breaker": draw(breakers(scope)) if draw(st.booleans()) else {"enabled": False},
        "budget": draw(maybe(budgets(scope))),
    }
