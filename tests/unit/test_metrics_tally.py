"""Tallies: hot-path counts kept as plain ints reach their counters at every collection."""

from __future__ import annotations

from prometheus_client import generate_latest

from nsfleet.metrics import Metrics


def test_a_tally_is_added_to_its_counter_when_the_registry_is_collected() -> None:
    metrics = Metrics()
    tally = metrics.tally(metrics.remoting_requests, "105", "0")
    assert metrics.tally(metrics.remoting_requests, "105", "0") is tally
    for _ in range(3):
        tally.inc()
    labels = {"code": "105", "response": "0"}
    assert metrics.remoting_requests.labels("105", "0")._value.get() == 0  # not yet added
    assert metrics.registry.get_sample_value("nsfleet_remoting_requests_total", labels) == 3
    tally.inc()
    text = generate_latest(metrics.registry).decode()
    assert 'nsfleet_remoting_requests_total{code="105",response="0"} 4.0' in text
    assert metrics.registry.get_sample_value("nsfleet_remoting_requests_total", labels) == 4


def test_a_child_is_looked_up_once() -> None:
    metrics = Metrics()
    child = metrics.child(metrics.remoting_latency, "105")
    assert metrics.child(metrics.remoting_latency, "105") is child
    child.observe(0.001)
    assert metrics.registry.get_sample_value("nsfleet_remoting_request_seconds_count",
                                             {"code": "105"}) == 1
