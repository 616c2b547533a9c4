"""What the ingress replicas share: their metrics, their requests in flight and the drain flag.

Each ingress replica keeps its own Prometheus registry and gate (its share of
``max_concurrent``); every `REPORT_S` seconds, and at every scrape, it reports a snapshot
of its registry and its requests in flight to `IngressState`, one actor per ingress
deployment that Ray Serve starts, restarts and deletes with it (a *deployment actor*). So
``GET /metrics`` on any replica answers for the whole service (counters summed over every
replica that ever reported, a dead one's included, so that they never go down when a replica is
replaced; gauges over the replicas alive), and a drain asked of one replica reaches all.
"""

from __future__ import annotations

import time
from typing import Any

import ray

# How often a replica reports, and how long a replica that stopped reporting counts as alive.
REPORT_S = 0.5
ALIVE_S = 5.0

# A registry's snapshot: (name, documentation, type, [(sample name, labels, value)]) per family,
# labels as sorted (key, value) pairs. Plain data, so that it crosses to the actor as it is.
Sample = tuple[str, tuple[tuple[str, str], ...], float]
Family = tuple[str, str, str, list[Sample]]


def snapshot(registry: Any) -> list[Family]:
    """The samples of every metric of a ``prometheus_client`` registry, as plain data.

    Without the ``_created`` timestamps, which do not add up across replicas.
    """
    return [
        (
            metric.name,
            metric.documentation,
            metric.type,
            [
                (s.name, tuple(sorted(s.labels.items())), float(s.value))
                for s in metric.samples
                if not s.name.endswith("_created")
            ],
        )
        for metric in registry.collect()
    ]


def merge(reports: list[tuple[list[Family], bool]]) -> list[Family]:
    """The service's metrics from each replica's snapshot and whether the replica is alive.

    Every sample summed over the replicas, a gauge's over the live ones only (a dead replica has no
    queue).
    """
    merged: dict[str, tuple[str, str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]] = {}
    for families, alive in reports:
        for name, doc, kind, samples in families:
            _, _, values = merged.setdefault(name, (doc, kind, {}))
            for sample, labels, value in samples:
                key = (sample, labels)
                values[key] = values.get(key, 0.0) + (value if alive or kind != "gauge" else 0.0)
    return [
        (name, doc, kind, [(s, labels, v) for (s, labels), v in values.items()])
        for name, (doc, kind, values) in merged.items()
    ]


def render(families: list[Family]) -> bytes:
    """Families in Prometheus's text exposition format."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.metrics_core import Metric

    class _Collected:
        def collect(self) -> list[Metric]:
            metrics = []
            for name, doc, kind, samples in families:
                metric = Metric(name, doc, kind)
                for sample, labels, value in samples:
                    metric.add_sample(sample, dict(labels), value)
                metrics.append(metric)
            return metrics

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collected())
    return generate_latest(registry)


class SharedState:
    """The ingress replicas' shared state (see the module's text), run as the actor `IngressState`.

    Kept in memory: when Serve restarts the actor, the replicas' next reports rebuild it (a dead
    replica's counts are then gone: Prometheus sees a counter reset).
    """

    def __init__(self) -> None:
        self.reports: dict[str, tuple[float, list[Family], int]] = {}
        self.pids: dict[str, int] = {}
        self.drain_since: float | None = None

    def report(self, replica: str, pid: int, families: list[Family], in_flight: int) -> bool:
        """Keep the snapshot and requests in flight of ``replica`` (process ``pid``).

        Returns:
            Whether to drain.
        """
        self.reports[replica] = (time.monotonic(), families, in_flight)
        self.pids[replica] = pid
        return self.drain_since is not None

    def drain(self) -> None:
        """From now on every replica refuses new score requests (it learns at its next report)."""
        if self.drain_since is None:
            self.drain_since = time.monotonic()

    def status(self) -> dict[str, Any]:
        """The live replicas and whether each knows of the drain.

        The live replicas (reported within ``ALIVE_S``), their requests in flight, and whether each
        has reported since the drain began (so knows of it).
        """
        now = time.monotonic()
        alive = {r: (t, n) for r, (t, _, n) in self.reports.items() if now - t < ALIVE_S}
        since = self.drain_since
        return {
            "replicas": len(alive),
            "in_flight": sum(n for _, n in alive.values()),
            "draining": since is not None,
            "all_know": since is not None and all(t > since for t, _ in alive.values()),
        }

    def metrics(self) -> list[Family]:
        """Every replica's metrics, merged (see `merge`), with the live replicas.

        With the live replicas: how many, and each one's score requests in flight (by replica id and
        process).
        """
        now = time.monotonic()
        alive = {r: n for r, (t, _, n) in self.reports.items() if now - t < ALIVE_S}
        reports = [(families, r in alive) for r, (_, families, _) in self.reports.items()]
        replicas: Family = (
            "jurybox_ingress_replicas",
            "Ingress replicas alive (reporting)",
            "gauge",
            [("jurybox_ingress_replicas", (), float(len(alive)))],
        )
        in_flight: Family = (
            "jurybox_ingress_in_flight",
            "Score requests in flight per live ingress replica",
            "gauge",
            [
                (
                    "jurybox_ingress_in_flight",
                    (("pid", str(self.pids[r])), ("replica", r)),
                    float(n),
                )
                for r, n in sorted(alive.items())
            ],
        )
        return [*merge(reports), replicas, in_flight]


# The deployment actor (builder.STATE_CLASS names it): no CPU of its own, it only adds numbers.
IngressState = ray.remote(num_cpus=0)(SharedState)
