"""The chart's access-control values: Secrets mounted as directories (so a changed Secret is
reloaded), settings the worker accepts, nothing added by default, and the render-time checks."""

from __future__ import annotations

import helm_python as helm
import pytest

from nsfleet import config
from tests.support.chartlib import MINIMAL, by_name, merge

FULL = merge(MINIMAL, {"security": {
    "aclMode": "enforcing", "accountsSecret": "nsfleet-acl", "readTokenSecret": "ro",
    "writeTokenSecret": "rw", "writeTokenSecretKey": "value", "anonymousReads": True,
    "httpProxyProtocol": True, "trustedProxies": "10.0.0.0/8,192.168.0.*"}})


def test_defaults_add_nothing(render) -> None:
    out = render(MINIMAL)
    assert not any(k.startswith(("NSFLEET_ACL", "NSFLEET_TRUSTED", "NSFLEET_HTTP_PROXY"))
                   or "TOKEN" in k for k in out.config)
    assert [v["name"] for v in out.pod_spec["volumes"]] == ["tmp"]


def test_secrets_are_mounted_as_directories_and_reach_the_worker(render) -> None:
    out = render(FULL)
    cfg = out.config
    assert cfg["NSFLEET_ACL_MODE"] == "enforcing"
    assert cfg["NSFLEET_ACL_FILE"] == "/etc/nsfleet/acl/acl.yml"
    assert cfg["NSFLEET_READ_TOKEN_FILE"] == "/etc/nsfleet/read-token/token"
    assert cfg["NSFLEET_WRITE_TOKEN_FILE"] == "/etc/nsfleet/write-token/value"
    volumes = by_name(out.pod_spec["volumes"])
    mounts = by_name(out.container["volumeMounts"])
    for name, secret, key in (("acl", "nsfleet-acl", "acl.yml"), ("read-token", "ro", "token"),
                              ("write-token", "rw", "value")):
        assert volumes[name]["secret"]["secretName"] == secret
        assert volumes[name]["secret"]["items"] == [{"key": key, "path": key}]
        assert "subPath" not in mounts[name] and mounts[name]["readOnly"] is True
    settings = config.load(None, cfg)
    assert settings.acl_mode == "enforcing" and settings.acl_anonymous_reads
    assert settings.http_proxy_protocol
    assert settings.trusted_proxy_rules == ["10.0.0.0/8", "192.168.0.*"]


@pytest.mark.parametrize("security,expected", [
    ({"aclMode": "enforcing"}, "security.accountsSecret"),
    ({"aclMode": "permissive"}, "security.accountsSecret"),
    ({"httpProxyProtocol": True}, "security.trustedProxies"),
])
def test_incomplete_security_values_are_refused(chart, security, expected: str) -> None:
    with pytest.raises(helm.HelmError, match=expected):
        chart.render(merge(MINIMAL, {"security": security}), name="nsf", namespace="rmq")


def test_schema_refuses_an_unknown_mode(chart) -> None:
    with pytest.raises(helm.HelmError):
        chart.render(merge(MINIMAL, {"security": {"aclMode": "strict"}}), name="nsf",
                     namespace="rmq")
