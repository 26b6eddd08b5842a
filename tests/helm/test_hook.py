"""Run the `helm test` hook's script against a stand-in worker on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from tests.support.chartlib import MINIMAL


class FakeWorker(BaseHTTPRequestHandler):
    # path -> list of (status, body); the last entry repeats
    answers: ClassVar[dict[str, list[tuple[int, bytes]]]] = {}

    def do_GET(self) -> None:
        queue = self.answers.get(self.path, [(404, b"no such path")])
        status, body = queue.pop(0) if len(queue) > 1 else queue[0]
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def worker() -> Iterator[tuple[str, type[FakeWorker]]]:
    handler = type("Handler", (FakeWorker,), {"answers": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture(scope="module")
def hook_script(render) -> str:
    (container,) = render(MINIMAL).one("Pod")["spec"]["containers"]
    assert container["command"][:2] == ["python3", "-c"]
    return container["command"][2]


def run(script: str, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script],
        env={"NSFLEET_URL": url},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


READY = [(200, b'{"status": "ok"}')]


@pytest.mark.parametrize(
    ("route", "ok"),
    [
        (
            (
                404,
                json.dumps({"code": 17, "message": "No topic route info in name server"}).encode(),
            ),
            True,
        ),
        ((200, json.dumps({"brokerDatas": [], "queueDatas": []}).encode()), True),
        ((404, json.dumps({"code": 1, "message": "system error"}).encode()), False),
        ((404, b"<html>not found</html>"), False),
        ((404, b"[17]"), False),
        ((500, b'{"code": 17}'), False),
    ],
)
def test_route_check(worker, hook_script, route, ok: bool) -> None:
    url, handler = worker
    handler.answers.update({"/readyz": READY, "/v1/routes/TBW102": [route]})
    result = run(hook_script, url)
    assert (result.returncode == 0) is ok, result.stdout + result.stderr


def test_waits_for_readiness_first(worker, hook_script) -> None:
    url, handler = worker
    handler.answers.update(
        {
            "/readyz": [(503, b'{"status": "draining"}'), *READY],
            "/v1/routes/TBW102": [(404, b'{"code": 17}')],
        }
    )
    result = run(hook_script, url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/readyz not ready yet (503)" in result.stdout
    assert "404 code 17" in result.stdout
