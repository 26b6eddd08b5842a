"""The rendered objects are wired to each other and to the worker's settings."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import helm_python as helm
import pytest

from nsfleet import config
from tests.support.chartlib import CI_FILES, FULLNAME, MINIMAL, by_name, ci, ci_values, merge

CI_IDS = [p.stem for p in CI_FILES]
CUSTOM_PORTS = merge(
    MINIMAL, {"config": {"httpPort": 18080, "remotingPort": 19876, "metricsPort": 19090}}
)
PORT_CASES = [*((ci_values(p), p.stem) for p in CI_FILES), (CUSTOM_PORTS, "custom-ports")]


def env_names(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return by_name(container.get("env", []))


# -- ports -----------------------------------------------------------------------


@pytest.mark.parametrize(("values", "case"), PORT_CASES, ids=[c for _, c in PORT_CASES])
def test_ports_match_the_worker_settings(render, values, case) -> None:
    out = render(values)
    cfg = out.config
    http, remoting, metrics = (
        int(cfg[k]) for k in ("NSFLEET_HTTP_PORT", "NSFLEET_REMOTING_PORT", "NSFLEET_METRICS_PORT")
    )
    container_ports = {p["name"]: p["containerPort"] for p in out.container["ports"]}
    service_ports = by_name(out.service["spec"]["ports"])

    expected = {"http": http, "remoting": remoting}
    if metrics > 0:
        expected["metrics"] = metrics
    assert container_ports == expected
    assert {name: p["port"] for name, p in service_ports.items()} == expected
    for name, port in service_ports.items():
        # targetPort by name, resolved by the container port of that name
        assert port["targetPort"] == name
        assert port["protocol"] == "TCP"
    assert out.container["envFrom"] == [{"configMapRef": {"name": FULLNAME}}]


def test_custom_ports_reach_the_configmap(render) -> None:
    cfg = render(CUSTOM_PORTS).config
    assert cfg["NSFLEET_HTTP_PORT"] == "18080"
    assert cfg["NSFLEET_REMOTING_PORT"] == "19876"
    assert cfg["NSFLEET_METRICS_PORT"] == "19090"


def test_metrics_on_the_http_port_when_metrics_port_is_zero(render) -> None:
    values = merge(
        MINIMAL, {"config": {"metricsPort": 0}, "metrics": {"serviceMonitor": {"enabled": True}}}
    )
    out = render(values)
    assert out.config["NSFLEET_METRICS_PORT"] == "0"
    assert "metrics" not in by_name(out.service["spec"]["ports"])
    (endpoint,) = out.one("ServiceMonitor")["spec"]["endpoints"]
    assert endpoint["port"] == "http"
    assert endpoint["path"] == "/metrics"


def test_servicemonitor_scrapes_the_metrics_service_port(render) -> None:
    out = render(ci("monitoring-netpol-values"))
    monitor = out.one("ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics"
    assert endpoint["port"] in by_name(out.service["spec"]["ports"])
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= out.service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


@pytest.mark.parametrize("processes,env", [(1, None), (4, "4"), ("auto", "auto")])
def test_processes_per_pod(render, processes: object, env: str | None) -> None:
    cfg = render(merge(MINIMAL, {"processes": processes})).config
    assert cfg.get("NSFLEET_PROCESSES") == env  # one process per pod by default


def test_config_map_carries_every_setting(render) -> None:
    cfg = render(MINIMAL).config
    assert cfg == {
        "NSFLEET_REDIS_URL": "redis://redis.data.svc:6379/0",
        "NSFLEET_HOST": "0.0.0.0",
        "NSFLEET_HTTP_PORT": "8080",
        "NSFLEET_REMOTING_PORT": "9876",
        "NSFLEET_METRICS_PORT": "9090",
        "NSFLEET_NAMESPACE": "default",
        "NSFLEET_LAYOUT_MOVE": "auto",
        "NSFLEET_BROKER_TIMEOUT": "120",
        "NSFLEET_SWEEP_INTERVAL": "10",
        "NSFLEET_LOG_FORMAT": "json",
        "NSFLEET_LOG_LEVEL": "info",
        "NSFLEET_DRAIN_TIMEOUT": "10",
        "NSFLEET_LONG_POLL_MAX": "30",
        "NSFLEET_MAX_BODY_SIZE": "16777216",
        "NSFLEET_MAX_FRAME_SIZE": "16777216",
        "NSFLEET_EXPIRY_GUARD_SHARE": "0",
        "NSFLEET_EXPIRY_GUARD_MAX_HOLD": "120",
        "NSFLEET_ROUTE_CACHE": "true",
        "NSFLEET_STALE_SERVE_MAX": "120",
        "NSFLEET_MIN_REPLICA_ACKS": "0",
        "NSFLEET_REPLICA_ACK_TIMEOUT": "0.5",
    }


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_the_worker_accepts_every_rendered_setting(render, path: Path) -> None:
    """The ConfigMap is fed to the worker's own settings loader: every key is a setting it
    knows and every value parses (a chart/worker mismatch fails here, not in a pod)."""
    cfg = render(ci_values(path)).config
    known = {config.env_name(f.name) for f in fields(config.Settings)}
    assert set(cfg) <= known
    settings = config.load(None, {**cfg, "NSFLEET_REDIS_PASSWORD": "from-the-secret"})
    assert settings.http_port == int(cfg["NSFLEET_HTTP_PORT"])
    assert settings.expiry_guard_share == float(cfg["NSFLEET_EXPIRY_GUARD_SHARE"])


def test_large_numbers_are_not_rendered_in_exponent_form(render) -> None:
    cfg = render(merge(MINIMAL, {"config": {"maxBodySize": 1073741824}})).config
    assert cfg["NSFLEET_MAX_BODY_SIZE"] == "1073741824"


# -- probes and shutdown -----------------------------------------------------------


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_probes_hit_readyz_and_livez_on_the_http_port(render, path: Path) -> None:
    out = render(ci_values(path))
    c = out.container
    http_port = {p["name"]: p["containerPort"] for p in c["ports"]}["http"]
    assert http_port == int(out.config["NSFLEET_HTTP_PORT"])
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}
    assert c["startupProbe"]["httpGet"] == {"path": "/livez", "port": "http"}


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_grace_period_outlasts_prestop_drain_and_long_poll(render, path: Path) -> None:
    out = render(ci_values(path))
    spec, cfg = out.pod_spec, out.config
    pre_stop = out.container["lifecycle"]["preStop"]
    if "sleep" in pre_stop:
        sleep = pre_stop["sleep"]["seconds"]
    else:
        command = pre_stop["exec"]["command"]
        assert command[0] == "/bin/sleep"
        sleep = int(command[1])
    assert sleep > 0
    need = sleep + int(cfg["NSFLEET_DRAIN_TIMEOUT"]) + int(cfg["NSFLEET_LONG_POLL_MAX"])
    assert spec["terminationGracePeriodSeconds"] > need


def test_grace_period_is_computed_from_the_values(render) -> None:
    values = merge(
        MINIMAL,
        {
            "preStop": {"sleepSeconds": 7},
            "config": {"drainTimeout": 20, "longPollMax": 60},
            "terminationGraceMarginSeconds": 3,
        },
    )
    assert render(values).pod_spec["terminationGracePeriodSeconds"] == 7 + 20 + 60 + 3


@pytest.mark.parametrize("grace", [45, 10])
def test_an_explicit_grace_period_too_short_is_refused(chart, grace: int) -> None:
    # default preStop 5 + drain 10 + long-poll 30 = 45: the grace must be larger.
    values = merge(MINIMAL, {"terminationGracePeriodSeconds": grace})
    with pytest.raises(helm.HelmRenderError, match="terminationGracePeriodSeconds"):
        chart.render(values, name="nsf", namespace="rmq")


def test_an_explicit_grace_period_long_enough_is_used(render) -> None:
    values = merge(MINIMAL, {"terminationGracePeriodSeconds": 46})
    assert render(values).pod_spec["terminationGracePeriodSeconds"] == 46


@pytest.mark.parametrize(
    ("mode", "kind"), [("sleep", "sleep"), ("exec", "exec"), ("auto", "sleep")]
)
def test_prestop_mode(render, mode: str, kind: str) -> None:
    # "auto" picks the native sleep action: Helm's offline default KubeVersion is >= 1.30.
    pre_stop = render(merge(MINIMAL, {"preStop": {"mode": mode}})).container["lifecycle"]
    assert list(pre_stop["preStop"]) == [kind]


# -- Redis wiring ------------------------------------------------------------------


def test_redis_url_by_url_reaches_the_pod_without_password(render) -> None:
    out = render(ci("external-url-values"))
    assert out.config["NSFLEET_REDIS_URL"] == "redis://redis-master.data.svc.cluster.local:6379/2"
    assert "NSFLEET_REDIS_PASSWORD" not in env_names(out.container)


def test_redis_by_host_with_tls_and_secret(render) -> None:
    out = render(ci("external-host-tls-values"))
    assert out.config["NSFLEET_REDIS_URL"] == (
        "rediss://redis.example.internal:6380/3?ssl_ca_certs=/etc/nsfleet/redis-tls/ca.crt"
    )
    assert out.config["NSFLEET_REDIS_USERNAME"] == "nsfleet"
    password = env_names(out.container)["NSFLEET_REDIS_PASSWORD"]
    assert password == {
        "name": "NSFLEET_REDIS_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "nsfleet-redis", "key": "password"}},
    }
    mounts = by_name(out.container["volumeMounts"])
    assert mounts["redis-ca"] == {
        "name": "redis-ca",
        "mountPath": "/etc/nsfleet/redis-tls",
        "readOnly": True,
    }
    volumes = by_name(out.pod_spec["volumes"])
    assert volumes["redis-ca"]["secret"]["secretName"] == "nsfleet-redis-ca"


def test_tls_without_verification(render) -> None:
    values = {"externalRedis": {"host": "r", "tls": {"enabled": True, "insecureSkipVerify": True}}}
    assert render(values).config["NSFLEET_REDIS_URL"] == "rediss://r:6379/0?ssl_cert_reqs=none"


def test_ipv6_host_is_bracketed(render) -> None:
    values = {"externalRedis": {"host": "fd00::10", "port": 6390}}
    assert render(values).config["NSFLEET_REDIS_URL"] == "redis://[fd00::10]:6390/0"


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_no_secret_in_the_config_map(render, path: Path) -> None:
    out = render(ci_values(path))
    assert not any("PASSWORD" in key for key in out.config)
    assert re.search(r"://[^/@]*:[^/@]*@", out.config["NSFLEET_REDIS_URL"]) is None
    for env in out.container.get("env", []):
        if "PASSWORD" in env["name"]:
            assert "value" not in env
            assert set(env["valueFrom"]) == {"secretKeyRef"}


def test_in_chart_redis(render) -> None:
    out = render(ci("in-chart-redis-values"))
    sts = out.one("StatefulSet", f"{FULLNAME}-redis")
    headless = out.one("Service", f"{FULLNAME}-redis")
    assert headless["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    assert sts["spec"]["replicas"] == 1
    pod = sts["spec"]["template"]
    assert headless["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (redis,) = pod["spec"]["containers"]
    args = redis["args"]
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--maxmemory-policy"] == "noeviction"
    assert pairs["--appendonly"] == "yes"
    assert pairs["--hash-max-ziplist-entries"] == "128"  # as nsfleet's own servers
    assert pairs["--dir"] == "/data"
    assert pairs["--requirepass"] == "$(REDIS_PASSWORD)"
    assert env_names(redis)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "nsfleet-redis-auth",
        "key": "redis-password",
    }
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert claim["spec"]["storageClassName"] == "standard"
    assert by_name(redis["volumeMounts"])["data"]["mountPath"] == "/data"
    # the workers point at the headless Service, with the same password
    assert out.config["NSFLEET_REDIS_URL"] == f"redis://{FULLNAME}-redis.rmq.svc:6379/0"
    assert env_names(out.container)["NSFLEET_REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == {
        "name": "nsfleet-redis-auth",
        "key": "redis-password",
    }
    # the worker Service must not select the Redis pod, nor the Redis Service a worker
    worker_labels = out.deployment["spec"]["template"]["metadata"]["labels"]
    assert not out.service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert not headless["spec"]["selector"].items() <= worker_labels.items()


def test_in_chart_redis_without_password_or_pvc(render) -> None:
    out = render({"redis": {"enabled": True, "persistence": {"enabled": False}}})
    sts = out.one("StatefulSet")
    (redis,) = sts["spec"]["template"]["spec"]["containers"]
    assert "--requirepass" not in redis["args"]
    assert "NSFLEET_REDIS_PASSWORD" not in env_names(out.container)
    assert "volumeClaimTemplates" not in sts["spec"]
    assert by_name(sts["spec"]["template"]["spec"]["volumes"])["data"] == {
        "name": "data",
        "emptyDir": {},
    }


# -- rollouts ------------------------------------------------------------------------


def checksum(out) -> str:
    return out.deployment["spec"]["template"]["metadata"]["annotations"]["checksum/config"]


@pytest.mark.parametrize(
    "change",
    [
        {"config": {"logLevel": "debug"}},
        {"config": {"brokerTimeout": 90}},
        {"externalRedis": {"url": "redis://other:6379/0"}},
    ],
)
def test_checksum_changes_when_a_setting_changes(render, change) -> None:
    base = render(MINIMAL)
    changed = render(merge(MINIMAL, change))
    assert len(checksum(base)) == 64
    assert checksum(changed) != checksum(base)


def test_checksum_is_stable_when_no_setting_changes(render) -> None:
    base = render(MINIMAL)
    other = render(
        merge(MINIMAL, {"autoscaling": {"maxReplicas": 20}, "podAnnotations": {"team": "mq"}})
    )
    assert checksum(other) == checksum(base)


# -- scaling and placement ------------------------------------------------------------


def test_hpa_by_default_scales_the_deployment_on_cpu(render) -> None:
    out = render(MINIMAL)
    assert "replicas" not in out.deployment["spec"]
    hpa = out.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": FULLNAME,
    }
    assert hpa["spec"]["metrics"] == [
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 70},
            },
        }
    ]
    assert out.container["resources"]["requests"]["cpu"]


def test_fixed_replicas_without_hpa(render) -> None:
    out = render(ci("fixed-replicas-values"))
    assert out.maybe("HorizontalPodAutoscaler") is None
    assert out.deployment["spec"]["replicas"] == 3
    pdb = out.one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 2
    assert "maxUnavailable" not in pdb["spec"]


def test_pdb_selects_the_worker_pods(render) -> None:
    out = render(MINIMAL)
    pdb = out.one("PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1
    labels = out.deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert (
        out.deployment["spec"]["selector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]
    )
    assert out.service["spec"]["selector"] == pdb["spec"]["selector"]["matchLabels"]


def test_rolling_update_never_drops_below_capacity(render) -> None:
    strategy = render(MINIMAL).deployment["spec"]["strategy"]
    assert strategy["rollingUpdate"]["maxUnavailable"] == 0


def test_topology_spread_across_zones_and_hosts(render) -> None:
    out = render(MINIMAL)
    constraints = by_name(
        [{**c, "name": c["topologyKey"]} for c in out.pod_spec["topologySpreadConstraints"]]
    )
    assert set(constraints) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    labels = out.deployment["spec"]["template"]["metadata"]["labels"]
    for c in constraints.values():
        assert c["labelSelector"]["matchLabels"].items() <= labels.items()
        assert c["maxSkew"] == 1


# -- security -------------------------------------------------------------------------


def assert_hardened(container: dict[str, Any], pod: dict[str, Any]) -> None:
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sc.get("privileged", False) is False
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    pod_sc = pod["securityContext"]
    assert pod_sc["runAsNonRoot"] is True
    assert pod_sc["runAsUser"] > 0
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False


@pytest.mark.parametrize("path", CI_FILES, ids=CI_IDS)
def test_every_pod_is_hardened(render, path: Path) -> None:
    out = render(ci_values(path))
    assert_hardened(out.container, out.pod_spec)
    assert out.pod_spec["securityContext"]["runAsUser"] == 10001
    for sts in out.all("StatefulSet"):
        pod = sts["spec"]["template"]["spec"]
        for container in pod["containers"]:
            assert_hardened(container, pod)
    test_pod = out.one("Pod")
    for container in test_pod["spec"]["containers"]:
        assert_hardened(container, test_pod["spec"])


def test_service_account(render) -> None:
    out = render(MINIMAL)
    account = out.one("ServiceAccount")
    assert out.pod_spec["serviceAccountName"] == account["metadata"]["name"] == FULLNAME
    assert account["automountServiceAccountToken"] is False
    out = render(merge(MINIMAL, {"serviceAccount": {"create": False}}))
    assert out.maybe("ServiceAccount") is None
    assert out.pod_spec["serviceAccountName"] == "default"


def test_resources_are_set(render) -> None:
    resources = render(MINIMAL).container["resources"]
    assert resources["requests"]["cpu"] and resources["requests"]["memory"]
    assert resources["limits"]["memory"]


def test_image_defaults_to_the_chart_app_version(render, chart) -> None:
    out = render(MINIMAL)
    assert out.container["image"] == f"ghcr.io/nsfleet/nsfleet:{chart.metadata['appVersion']}"
    assert out.container["args"] == ["serve"]
    digest = "sha256:" + "a" * 64
    out = render(merge(MINIMAL, {"image": {"digest": digest}}))
    assert out.container["image"] == f"ghcr.io/nsfleet/nsfleet@{digest}"


# -- network policy ---------------------------------------------------------------------


def test_network_policy(render) -> None:
    out = render(ci("monitoring-netpol-values"))
    policy = out.one("NetworkPolicy")
    labels = out.deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    container_ports = {p["name"] for p in out.container["ports"]}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            assert port["port"] in container_ports
    client_rule, metrics_rule = policy["spec"]["ingress"]
    assert {p["port"] for p in client_rule["ports"]} == {"remoting", "http"}
    # the release's `helm test` pod keeps access to the HTTP port
    test_labels = out.one("Pod")["metadata"]["labels"]
    assert any(
        peer.get("podSelector", {}).get("matchLabels", {}).items() <= test_labels.items()
        for peer in client_rule["from"]
        if "podSelector" in peer
    )
    assert [p["port"] for p in metrics_rule["ports"]] == ["metrics"]
    egress_ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 6379}


@pytest.mark.parametrize(
    ("url", "ports"),
    [
        ("redis://r:6390/0", {6390}),
        ("rediss://user@r/0", {6379}),
        ("redis+sentinel://s0:26379,s1:26380/mymaster/0", {26379, 26380, 6379}),
        ("rediss+sentinel://s0,s1/mymaster", {26379, 6379}),
        ("unix:///run/redis/redis.sock", None),
        ("redis://[fd00::1]:7000/0", {7000}),
        ("redis+cluster://n0:7000,n1:7001,n2:7000", {7000, 7001}),
        ("rediss+cluster://n0,n1", {6379}),
    ],
)
def test_network_policy_egress_follows_the_redis_url(
    render, url: str, ports: set[int] | None
) -> None:
    values = {
        "externalRedis": {"url": url},
        "networkPolicy": {"enabled": True, "egress": {"enabled": True}},
    }
    policy = render(values).one("NetworkPolicy")
    if ports is None:  # a unix socket needs no network
        assert len(policy["spec"]["egress"]) == 1
        return
    redis_rule = policy["spec"]["egress"][1]
    assert {p["port"] for p in redis_rule["ports"]} == ports


def test_network_policy_for_the_in_chart_redis(render) -> None:
    values = {
        "redis": {"enabled": True},
        "networkPolicy": {"enabled": True, "egress": {"enabled": True}},
    }
    out = render(values)
    redis_policy = out.one("NetworkPolicy", f"{FULLNAME}-redis")
    (rule,) = redis_policy["spec"]["ingress"]
    (peer,) = rule["from"]
    worker_labels = out.deployment["spec"]["template"]["metadata"]["labels"]
    assert peer["podSelector"]["matchLabels"].items() <= worker_labels.items()
    worker_policy = out.one("NetworkPolicy", FULLNAME)
    redis_egress = worker_policy["spec"]["egress"][1]
    assert redis_egress["ports"] == [{"port": 6379, "protocol": "TCP"}]
    sts_labels = out.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert redis_egress["to"][0]["podSelector"]["matchLabels"].items() <= sts_labels.items()


# -- notes and the helm test hook -----------------------------------------------------------


def test_notes_tell_brokers_and_clients_where_to_connect(render) -> None:
    notes = render(MINIMAL).notes
    assert f"namesrvAddr={FULLNAME}.rmq.svc:9876" in notes
    assert f'setNamesrvAddr("{FULLNAME}.rmq.svc:9876")' in notes
    assert f"NAMESRV_ADDR={FULLNAME}.rmq.svc:9876" in notes
    assert "helm test" in notes
    custom = render(CUSTOM_PORTS).notes
    assert f"namesrvAddr={FULLNAME}.rmq.svc:19876" in custom


def test_helm_test_hook_pod(render) -> None:
    out = render(CUSTOM_PORTS)
    pod = out.one("Pod", f"{FULLNAME}-test")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert pod["spec"]["restartPolicy"] == "Never"
    (container,) = pod["spec"]["containers"]
    assert container["image"] == out.container["image"]
    assert container["command"][:2] == ["python3", "-c"]
    assert env_names(container)["NSFLEET_URL"]["value"] == f"http://{FULLNAME}.rmq.svc:18080"
    script = container["command"][2]
    assert "/readyz" in script and "/v1/routes/TBW102" in script


def test_helm_test_image_can_be_overridden(render) -> None:
    values = merge(MINIMAL, {"tests": {"image": {"repository": "python", "tag": "3.12-alpine"}}})
    (container,) = render(values).one("Pod")["spec"]["containers"]
    assert container["image"] == "python:3.12-alpine"


def test_worker_env_has_only_intended_extras(render) -> None:
    values = merge(MINIMAL, {"extraEnv": [{"name": "TZ", "value": "UTC"}]})
    env = env_names(render(values).container)
    assert env == {"TZ": {"name": "TZ", "value": "UTC"},
                   "NSFLEET_ADVERTISE_ADDRESS": {  # the address server lists the pod's IP
                       "name": "NSFLEET_ADVERTISE_ADDRESS",
                       "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}}


@pytest.mark.parametrize(
    ("pdb", "field", "expected"),
    [
        ({"maxUnavailable": "25%"}, "maxUnavailable", "25%"),
        ({"minAvailable": "50%"}, "minAvailable", "50%"),
        ({"maxUnavailable": None, "minAvailable": 1}, "minAvailable", 1),
    ],
)
def test_pdb_int_or_percent(render, pdb, field: str, expected) -> None:
    spec = render(merge(MINIMAL, {"podDisruptionBudget": pdb})).one("PodDisruptionBudget")["spec"]
    assert spec[field] == expected
    assert {"minAvailable", "maxUnavailable"} & set(spec) == {field}


def test_hpa_on_memory_too(render) -> None:
    values = merge(MINIMAL, {"autoscaling": {"targetMemoryUtilizationPercentage": 80}})
    metrics = render(values).one("HorizontalPodAutoscaler")["spec"]["metrics"]
    assert [
        (m["resource"]["name"], m["resource"]["target"]["averageUtilization"]) for m in metrics
    ] == [("cpu", 70), ("memory", 80)]
