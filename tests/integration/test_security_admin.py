"""``nsfleet admin`` against a worker with access control enforcing: it signs remoting requests
(--access-key, --secret-key-file or NSFLEET_SECRET_KEY, as mqadmin with conf/tools.yml) and
sends an HTTP bearer token (--token-file or NSFLEET_TOKEN); without them it is refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from nsfleet.cli import main
from nsfleet.redis_server import RedisServer
from tests.support.workers import WorkerProcess

pytestmark = pytest.mark.redis

TOKEN = "admin-cli-token-0123456789"


@pytest.fixture(scope="module")
def worker(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[WorkerProcess, Path]]:
    tmp = tmp_path_factory.mktemp("acl-admin")
    (tmp / "acl.yml").write_text("accounts:\n  - {accessKey: ops, secretKey: ops-secret, "
                                 "admin: true}\n")
    (tmp / "write-token").write_text(TOKEN)
    (tmp / "secret").write_text("ops-secret\n")
    (tmp / "wrong").write_text("not-it\n")
    w = WorkerProcess({"NSFLEET_REDIS_URL": redis_server.url, "NSFLEET_NAMESPACE": "acl-admin",
                       "NSFLEET_ACL_MODE": "enforcing", "NSFLEET_ACL_FILE": str(tmp / "acl.yml"),
                       "NSFLEET_WRITE_TOKEN_FILE": str(tmp / "write-token")},
                      tmp / "worker.log").start()
    try:
        yield w, tmp
    finally:
        assert w.stop() == 0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["admin", *argv])
    out, err = capsys.readouterr()
    return code, out + err


def test_remoting_admin_signs(worker: tuple[WorkerProcess, Path],
                              capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    w, tmp = worker
    n = f"127.0.0.1:{w.remoting_port}"
    code, text = run(capsys, "-n", n, "kv", "put", "NS", "k", "v1")
    assert code == 1 and "response code 16: No accessKey is configured" in text
    code, text = run(capsys, "-n", n, "--access-key", "ops", "--secret-key-file",
                     str(tmp / "wrong"), "kv", "put", "NS", "k", "v1")
    assert code == 1 and "Check signature failed for accessKey=ops" in text
    assert "ops-secret" not in text
    code, text = run(capsys, "-n", n, "--access-key", "ops", "--secret-key-file",
                     str(tmp / "secret"), "kv", "put", "NS", "k", "v1")
    assert code == 0, text
    monkeypatch.setenv("NSFLEET_ACCESS_KEY", "ops")
    monkeypatch.setenv("NSFLEET_SECRET_KEY", "ops-secret")
    code, text = run(capsys, "-n", n, "kv", "get", "NS", "k")
    assert code == 0 and "v1" in text


def test_http_admin_sends_its_token(worker: tuple[WorkerProcess, Path],
                                    capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    w, tmp = worker
    code, text = run(capsys, "--server", w.url, "kv", "put", "NS", "h", "v2")
    assert code == 1 and "bearer token" in text
    assert "HTTP 401: give a token with --token-file FILE" in text
    code, text = run(capsys, "--server", w.url, "--token-file", str(tmp / "write-token"),
                     "kv", "put", "NS", "h", "v2")
    assert code == 0, text
    monkeypatch.setenv("NSFLEET_TOKEN", TOKEN)
    code, text = run(capsys, "--server", w.url, "kv", "get", "NS", "h")
    assert code == 0 and "v2" in text


def test_serve_refuses_to_start_half_protected(tmp_path: Path) -> None:
    """A bad accounts file stops the worker before it listens or starts a Redis."""
    import subprocess
    import sys

    bad = tmp_path / "acl.yml"
    bad.write_text("accounts: [{accessKey: a}]\n")
    base = [sys.executable, "-m", "nsfleet", "serve", "--host", "127.0.0.1",
            "--redis-url", "redis://127.0.0.1:1/0"]
    done = subprocess.run([*base, "--acl-mode", "enforcing", "--acl-file", str(bad)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "secretKey: must be a non-empty string" in done.stderr
    done = subprocess.run([*base, "--acl-mode", "enforcing"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "needs --acl-file" in done.stderr


def test_simulate_sends_the_write_token(worker: tuple[WorkerProcess, Path],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``nsfleet simulate`` registers through a tokened HTTP API with --token-file; without it
    every registration is refused (401) and the run fails."""
    w, tmp = worker
    argv = ["simulate", "--brokers", "2", "--topics", "4", "--server", w.url,
            "--duration", "0.5", "--heartbeat", "0.2", "--json"]
    assert main(argv) == 1
    assert '"registered": 0' in capsys.readouterr().out
    assert main([*argv, "--token-file", str(tmp / "write-token")]) == 0
    assert '"registered": 2' in capsys.readouterr().out


def test_simulated_remoting_brokers_sign_their_requests(
        worker: tuple[WorkerProcess, Path], capsys: pytest.CaptureFixture[str]) -> None:
    """``nsfleet simulate -n`` signs as a broker with aclEnable, with admin's options."""
    w, tmp = worker
    argv = ["simulate", "--brokers", "2", "--topics", "2", "-n", f"127.0.0.1:{w.remoting_port}",
            "--duration", "0", "--json"]
    assert main(argv) == 1
    assert "No accessKey is configured" in capsys.readouterr().err
    assert main([*argv, "--access-key", "ops", "--secret-key-file", str(tmp / "secret")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["registered"], summary["unregistered"]) == (2, 2)
    assert main([*argv, "--access-key", "ops"]) == 2
    assert "needs both --access-key and --secret-key-file" in capsys.readouterr().err
    assert main(["simulate", "--tls", "--duration", "0"]) == 2
    assert "--tls: only with -n (remoting)" in capsys.readouterr().err
