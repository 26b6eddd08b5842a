"""TLS on the remoting port in the chart: certificates from Secrets, mounted whole (so a renewed
Secret reaches the worker), the settings the worker reads, and refusals of half a set-up."""

from __future__ import annotations

from typing import Any

import helm_python as helm
import pytest

from nsfleet import config
from tests.support.chartlib import MINIMAL, by_name, ci, merge

TLS = ci("remoting-tls-values")


def test_default_chart_has_no_tls(render) -> None:
    out = render(MINIMAL)
    assert not any(k.startswith("NSFLEET_TLS_") for k in out.config)
    assert "remoting-tls" not in by_name(out.pod_spec["volumes"])


def test_certificates_come_from_secrets_and_reach_the_worker_settings(render) -> None:
    out = render(TLS)
    volumes = by_name(out.pod_spec["volumes"])
    assert volumes["remoting-tls"]["secret"]["secretName"] == "nsfleet-remoting-tls"
    assert volumes["remoting-tls-ca"]["secret"]["secretName"] == "nsfleet-client-ca"
    mounts = by_name(out.container["volumeMounts"])
    for name in ("remoting-tls", "remoting-tls-ca"):
        assert mounts[name]["readOnly"] is True
        assert "subPath" not in mounts[name]  # subPath mounts never see a renewed Secret
    settings = config.load(None, out.config)
    assert (settings.tls_mode, settings.tls_client_auth) == ("enforcing", "require")
    assert settings.tls_reload_interval == 30
    files = {"cert": settings.tls_cert_file, "key": settings.tls_key_file,
             "ca": settings.tls_ca_file}
    items = {v["name"]: {i["path"] for i in v["secret"]["items"]} for v in volumes.values()
             if "secret" in v}
    assert files == {"cert": f"{mounts['remoting-tls']['mountPath']}/tls.crt",
                     "key": f"{mounts['remoting-tls']['mountPath']}/tls.key",
                     "ca": f"{mounts['remoting-tls-ca']['mountPath']}/ca.crt"}
    assert items["remoting-tls"] == {"tls.crt", "tls.key"}
    assert items["remoting-tls-ca"] == {"ca.crt"}


def test_permissive_without_client_certificates_mounts_no_ca(render) -> None:
    out = render(merge(MINIMAL, {"tls": {"mode": "permissive", "secretName": "s",
                                         "certKey": "server.pem", "keyKey": "server.key"}}))
    assert "remoting-tls-ca" not in by_name(out.pod_spec["volumes"])
    settings = config.load(None, out.config)
    assert settings.tls_cert_file.endswith("/server.pem")
    assert (settings.tls_ca_file, settings.tls_client_auth) == ("", "none")


@pytest.mark.parametrize(("tls", "expected"), [
    ({"mode": "enforcing"}, "tls.mode enforcing needs tls.secretName"),
    ({"mode": "permissive", "secretName": "s", "clientAuth": "optional"},
     "tls.clientAuth optional needs tls.caSecretName"),
    ({"secretName": "s"}, "need tls.mode permissive or enforcing"),
])
def test_half_a_tls_set_up_is_refused(chart, tls: dict[str, Any], expected: str) -> None:
    with pytest.raises(helm.HelmError) as caught:
        chart.render(merge(MINIMAL, {"tls": tls}), name="nsf", namespace="rmq")
    assert expected in str(caught.value)


@pytest.mark.parametrize("tls", [{"mode": "on"}, {"clientAuth": "want"},
                                 {"reloadInterval": 0}, {"secretName": "Bad_Name"}])
def test_schema_refuses_bad_tls_values(chart, tls: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmError):
        chart.render(merge(MINIMAL, {"tls": tls}), name="nsf", namespace="rmq")
