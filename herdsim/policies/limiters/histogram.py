"""The quantile Envoy reads from its latency histogram (libcircllhist, as the gradient
controller's ``processLatencySamplesAndClear`` calls it).

Envoy inserts each latency as whole microseconds into a log-linear histogram whose bins
keep two significant decimal digits (``double_to_hist_bucket``: 69,123 µs falls in
[69,000, 70,000), 5 µs in [5.0, 5.1)). ``hist_approx_quantile`` walks the bins in order
to the one holding rank q × n and interpolates inside it; a rank that ends a bin exactly
reads that bin's upper edge. So the median of 4 samples is the top of the second one's
bin (not the mean of the middle two), and the median of 5 equal samples of 5 ms is 5,050
µs. Read from openhistogram/libcircllhist ``src/circllhist.c`` (``double_to_hist_bucket``,
``hist_approx_quantile``) @63a16dd6f2fc7bc841bb17ff92be8318df60e2e1.
"""

from __future__ import annotations

from collections import Counter


def bucket(us: int) -> tuple[float, float]:
    """The bin of a latency of *us* whole microseconds: (left edge, width), computed in
    floating point as ``hist_bucket_to_double`` and its bin width do (so the left edge of
    the bin of 465,678 µs is 459,999.99999999994: Envoy's cast to int then reads 459,999)."""
    if us <= 0:
        return 0.0, 0.0
    exp = len(str(us)) - 1  # floor(log10(us))
    val = us * 10 // 10 ** exp  # the two leading digits, 10..99
    power = 10.0 ** exp
    return (val / 10.0) * power, power / 10.0


def quantile(samples_us: list[int], q: float) -> float:
    """``hist_approx_quantile`` of the histogram of *samples_us* (not empty) at *q*."""
    bins = sorted(Counter(bucket(us) for us in samples_us).items())
    rank = q * len(samples_us)
    i, lower, upper = 0, 0, bins[0][1]
    while i < len(bins) - 1 and upper < rank:  # walk to the bin holding the rank
        i += 1
        lower, upper = upper, upper + bins[i][1]
    left, width = bins[i][0]
    if lower == rank:
        return left
    if upper == rank:
        return left + width
    return left + (rank - lower) / (upper - lower) * width
