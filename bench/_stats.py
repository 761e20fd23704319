"""Small helpers shared by the benchmarks: percentiles and table printing."""

from __future__ import annotations

import statistics


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(samples: list[float]) -> str:
    return (
        f"p50 {percentile(samples, 50) * 1000:7.2f} ms"
        f"  p99 {percentile(samples, 99) * 1000:7.2f} ms"
        f"  mean {statistics.fmean(samples) * 1000:7.2f} ms"
    )


def ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:6.2f}x" if baseline else "   n/a"
