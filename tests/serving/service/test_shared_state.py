"""What the ingress replicas share (serving/service/shared.py): metrics summed over replicas, a
dead replica's counts kept and its gauges dropped, the drain known by every replica, and the
gate's shares adding up to the service's limits. The live multi-replica service is
tests/serving/service/test_service.py."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from jurybox.serving.service import shared
from jurybox.serving.service.gate import share
from jurybox.serving.service.metrics import Metrics
from jurybox.serving.service.shared import SharedState, merge, render, snapshot


def values(text: bytes) -> dict[tuple[str, tuple], float]:
    """Every sample of a Prometheus text page, parsed back by prometheus_client's own parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text.decode())
        for s in family.samples
    }


def replica(requests: int, votes: int, queue: int, seconds: float) -> Metrics:
    metrics = Metrics()
    for _ in range(requests):
        metrics.observe("/v1/score", 200, seconds)
    metrics.count_votes([{"votes": [{"judge": "a", "score": None, "error": "no score"}]}] * votes)
    metrics.queue.set(queue)
    return metrics


def test_merged_metrics_are_the_sums_of_the_replicas_and_parse_as_prometheus_text():
    one, two = replica(3, 2, 1, 0.2), replica(4, 5, 2, 7.0)
    got = values(render(merge([(snapshot(one.registry), True), (snapshot(two.registry), True)])))
    mine, theirs = values(one.text()), values(two.text())
    for key, value in got.items():  # every merged sample is the sum of the replicas' own
        assert value == pytest.approx(mine.get(key, 0.0) + theirs.get(key, 0.0)), key
    assert got[("jurybox_requests_total", (("route", "/v1/score"), ("status", "200")))] == 7
    assert got[("jurybox_unscored_votes_total", (("judge", "a"), ("reason", "other")))] == 7
    assert got[("jurybox_request_seconds_count", (("route", "/v1/score"),))] == 7
    assert got[("jurybox_request_seconds_bucket", (("le", "0.25"), ("route", "/v1/score")))] == 3
    assert got[("jurybox_queue_depth", ())] == 3
    assert not any(name.endswith("_created") for name, _ in got)  # timestamps do not add up


def test_a_dead_replicas_counts_stay_and_its_gauges_go():
    alive, dead = replica(1, 0, 1, 0.1), replica(5, 0, 4, 0.1)
    got = values(
        render(merge([(snapshot(alive.registry), True), (snapshot(dead.registry), False)]))
    )
    # Counters never go down when a replica is replaced; a dead replica has no queue.
    assert got[("jurybox_requests_total", (("route", "/v1/score"), ("status", "200")))] == 6
    assert got[("jurybox_queue_depth", ())] == 1


def test_the_state_counts_live_replicas_and_knows_who_has_heard_of_the_drain(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(shared.time, "monotonic", lambda: now[0])
    state = SharedState()
    a, b = replica(2, 0, 0, 0.1), replica(3, 0, 0, 0.1)
    assert state.report("a", 11, snapshot(a.registry), 1) is False
    assert state.report("b", 12, snapshot(b.registry), 2) is False
    assert state.status() == {"replicas": 2, "in_flight": 3, "draining": False, "all_know": False}
    now[0] += 1
    state.drain()
    assert state.status()["draining"] and not state.status()["all_know"]
    now[0] += 0.1
    assert state.report("a", 11, snapshot(a.registry), 0) is True  # a is told to drain
    assert not state.status()["all_know"]  # b has not reported since
    now[0] += 0.1
    assert state.report("b", 12, snapshot(b.registry), 1) is True
    assert state.status() == {"replicas": 2, "in_flight": 1, "draining": True, "all_know": True}
    # b dies: past ALIVE_S it is no replica any more, and its counts stay in the sums.
    now[0] += shared.ALIVE_S - 0.05
    state.report("a", 11, snapshot(a.registry), 0)
    now[0] += 0.1
    assert state.status()["replicas"] == 1 and state.status()["in_flight"] == 0
    got = values(render(state.metrics()))
    assert got[("jurybox_ingress_replicas", ())] == 1
    assert got[("jurybox_ingress_in_flight", (("pid", "11"), ("replica", "a")))] == 0
    assert ("jurybox_ingress_in_flight", (("pid", "12"), ("replica", "b"))) not in got
    assert got[("jurybox_requests_total", (("route", "/v1/score"), ("status", "200")))] == 5


@pytest.mark.parametrize("total", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("replicas", [1, 2, 3])
def test_the_replicas_shares_add_up_to_the_limit(total, replicas):
    shares = [share(total, replicas, rank) for rank in range(replicas)]
    assert sum(shares) == total and max(shares) - min(shares) <= 1
