"""Prometheus metrics of one process, on a registry of its own (tests build many apps).

Counters and histograms are fed where things happen (chat streams, GitHub calls,
retrieval); figures that live in the database or Redis (deliveries by status, processing
lag, dead letters, tasks by state, queue depth) are read at scrape time by the collectors
each package registers, so every instance reports the shared truth."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Scrape-time collectors: read shared state, set gauges. One failing leaves its gauges stale
# and counts in steelframe_scrape_errors_total; the scrape still answers.
Collector = Callable[["Metrics"], Awaitable[None]]


class Metrics:
    # Long: the metric declarations, one per metric, read as a table.
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.collectors: list[Collector] = []
        self.scrape_errors = Counter(
            "steelframe_scrape_errors",
            "Collectors that failed during a scrape",
            ["collector"],
            registry=r,
        )
        self.chat_turns = Counter(
            "steelframe_chat_turns",
            "Chat turns streamed, by how they ended",
            ["outcome"],
            registry=r,
        )
        self.chat_streams = Gauge(
            "steelframe_chat_streams_active", "Chat SSE streams open now", registry=r
        )
        self.chat_first_frame = Histogram(
            "steelframe_chat_first_frame_seconds",
            "From the request to the first frame of a chat stream",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
            registry=r,
        )
        self.retrieval = Histogram(
            "steelframe_retrieval_seconds",
            "One memory search",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
            registry=r,
        )
        self.github_requests = Counter(
            "steelframe_github_requests",
            "GitHub API calls by method and status",
            ["method", "status"],
            registry=r,
        )
        self.github_rate_remaining = Gauge(
            "steelframe_github_rate_remaining",
            "GitHub's x-ratelimit-remaining, by installation and resource",
            ["installation", "resource"],
            registry=r,
        )
        self.deliveries = Gauge(
            "steelframe_webhook_deliveries",
            "Stored webhook deliveries by status",
            ["status"],
            registry=r,
        )
        self.delivery_lag = Gauge(
            "steelframe_webhook_processing_lag_seconds",
            "Age of the oldest delivery not yet processed (0 when none waits)",
            registry=r,
        )
        self.delivery_retries = Gauge(
            "steelframe_webhook_retries",
            "Handler attempts beyond the first, over all deliveries",
            registry=r,
        )
        self.tasks = Gauge("steelframe_tasks", "Tasks by lifecycle state", ["state"], registry=r)
        self.queue_depth = Gauge(
            "steelframe_queue_depth", "Jobs waiting in the lifecycle queue", registry=r
        )
        # Read from the stored record at scrape time, like the webhook retries above.
        self.egress_blocked = Gauge(
            "steelframe_egress_blocked_requests",
            "Requests the coding runs' egress proxies refused, over all tasks",
            registry=r,
        )

    def add_collector(self, collector: Collector) -> None:
        self.collectors.append(collector)

    def set_counts(self, gauge: Gauge, counts: Mapping[str, float], every: tuple[str, ...]) -> None:
        """One labelled gauge per known value, 0 for those with none (absent != zero)."""
        for label in every:
            gauge.labels(label).set(counts.get(label, 0))

    def github_answer(
        self, method: str, status: int, installation: str | None, headers: Mapping[str, str]
    ) -> None:
        self.github_requests.labels(method, str(status)).inc()
        remaining = headers.get("x-ratelimit-remaining")
        if installation is not None and remaining is not None and remaining.isdigit():
            resource = headers.get("x-ratelimit-resource", "core")
            self.github_rate_remaining.labels(installation, resource).set(int(remaining))

    async def exposition(self) -> bytes:
        for collector in self.collectors:
            try:
                await collector(self)
            except Exception:  # a scrape must answer even when one source is down
                self.scrape_errors.labels(getattr(collector, "__name__", "collector")).inc()
        return generate_latest(self.registry)
