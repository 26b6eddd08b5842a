"""The address server in the chart: each pod advertises its own IP (downward API) by default;
``config.advertise: service`` lists the Service's address instead, and ``config.advertiseAddress``
any fixed one; the worker accepts what is rendered."""

from __future__ import annotations

import helm_python as helm
import pytest

from nsfleet import config
from tests.support.chartlib import FULLNAME, MINIMAL, NAMESPACE, by_name, merge


def test_each_pod_advertises_its_own_ip_by_default(render) -> None:
    out = render(MINIMAL)
    env = by_name(out.container["env"])
    assert env["NSFLEET_ADVERTISE_ADDRESS"]["valueFrom"] == {
        "fieldRef": {"fieldPath": "status.podIP"}}
    assert "NSFLEET_ADVERTISE_ADDRESS" not in out.config
    assert f"-Drocketmq.namesrv.domain={FULLNAME}.{NAMESPACE}.svc:8080" in out.notes


def test_the_service_address_is_advertised_when_asked(render) -> None:
    out = render(merge(MINIMAL, {"config": {"advertise": "service", "remotingPort": 19876}}))
    assert out.config["NSFLEET_ADVERTISE_ADDRESS"] == f"{FULLNAME}.{NAMESPACE}.svc:19876"
    assert "NSFLEET_ADVERTISE_ADDRESS" not in by_name(out.container.get("env", []))
    assert by_name(out.service["spec"]["ports"])["remoting"]["port"] == 19876
    settings = config.load(None, {**out.config, "NSFLEET_REDIS_PASSWORD": "x"})
    assert settings.advertise_address == f"{FULLNAME}.{NAMESPACE}.svc:19876"


def test_a_fixed_address_wins(render) -> None:
    out = render(merge(MINIMAL, {"config": {"advertise": "service",
                                            "advertiseAddress": "nsaddr.example.com:9876"}}))
    assert out.config["NSFLEET_ADVERTISE_ADDRESS"] == "nsaddr.example.com:9876"


@pytest.mark.parametrize("values", [{"advertise": "pod"}, {"advertiseAddress": "a b"},
                                    {"advertiseAddress": "host:port"}])
def test_the_schema_rejects_bad_advertise_values(render, values) -> None:
    with pytest.raises(helm.HelmError):
        render(merge(MINIMAL, {"config": values}))
