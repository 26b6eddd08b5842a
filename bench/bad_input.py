"""Bad input against one worker: what attack classes of malformed requests cost a legitimate
client meanwhile, the worker's memory, its log and the Redis keyspace.

One ``nsfleet serve`` worker on a throwaway Redis, one simulated broker registered over HTTP
(re-posted every 20 s so it never expires). A prober in a process of its own (so the senders'
GIL does not delay it) reads every 50 ms ``GET /readyz`` over one keep-alive HTTP connection
(http.client; a new one after a failure) and a remoting GET_ROUTEINFO_BY_TOPIC (code 105) over
one persistent TCP connection; a read failed when it was not 200 / SUCCESS or took over 2 s.
After an idle baseline, each attack class runs for ``--seconds`` by ``--senders`` threads, with
a ``--gap`` of quiet ("idle") between classes:

1. nested_json_http: bodies nested 100,000 deep to register, kv put, routes/watch and
   namesrv-config (expected 400);
2. huge_header_remoting: a JSON header whose extFields is an 8 MiB string (over the worker's
   1 MiB header limit), then one of 900 KiB (under it), a connection each, read until closed
   (at most 400 frames per sender);
3. malformed_http: raw requests with HTTP/9.9, a request line over 8,190 bytes, a header name
   with a space, Content-Length "abc" (expected 400);
4. kv_names: KV names with control characters, percent-encoded over HTTP (expected 400) and
   raw over remoting PUT_KV_CONFIG (code 100), and a PUT_KV_CONFIG without a value (expected
   a refusal, code != 0);
5. deep_json_remoting: a JSON header nested 100,000 deep, a connection each.

Reported: per class the prober's latency (n, p50, p99, max, ms) and failures, the bad requests
sent and the answers seen, the worker's RSS (after set-up, peak sampled every 0.25 s, and
``--settle`` s after the last attack), the worker's log during the attacks (lines, lines per
bad request, tracebacks, the longest line), Redis key names holding a control character, and
each figure against its target.

    .venv/bin/python bench/bad_input.py [--seconds 5] [--gap 2] [--settle 10] [--senders 4]
                                        [--classes nested_json_http,kv_names]
Results: bench/results/bad_input.json.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, ClassVar

import psutil
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.benchlib import new_results, start_worker, summary, write_results
from nsfleet.redis_server import RedisServer

HOST = "127.0.0.1"
TOPIC = "BenchTopic"
# Two topics: a single-topic registration from an unknown broker is refused (409, the
# single-topic guard of Java's RouteInfoManager.registerBroker).
BROKER = {"clusterName": "bench", "brokerAddr": "127.0.0.1:10911", "brokerName": "bench-b",
          "brokerId": 0, "topicConfigTable": {TOPIC: {}, "BenchTopic2": {}}}
HEARTBEAT_S = 20.0
PROBE_INTERVAL_S = 0.05
PROBE_TIMEOUT_S = 2.0
RSS_INTERVAL_S = 0.25
DEPTH = 100_000
HUGE_BYTES = 8 * 1024 * 1024  # 8 MiB
UNDER_LIMIT_BYTES = 900 * 1024  # under the worker's 1 MiB header limit
HUGE_CAP = 400  # frames per sender
GET_ROUTEINFO_BY_TOPIC, PUT_KV_CONFIG = 105, 100
CLASSES = ["nested_json_http", "huge_header_remoting", "malformed_http", "kv_names",
           "deep_json_remoting"]
CONTROL = frozenset([*range(0x20), 0x7F])

# Targets.
P99_MAX_MS = 50.0
RSS_GROWTH_MAX = 1.5
LINES_PER_REQUEST_MAX = 1.0
LINE_BYTES_MAX = 4096


# --- remoting frames ------------------------------------------------------------------------------


def frame(header: bytes, body: bytes = b"") -> bytes:
    """``int32 length | int32 (JSON << 24 | header length) | header | body``."""
    return struct.pack(">iI", 4 + len(header) + len(body), len(header)) + header + body


def json_header(code: int, ext: dict[str, str], opaque: int) -> bytes:
    return json.dumps({"code": code, "extFields": ext, "flag": 0, "language": "JAVA",
                       "opaque": opaque, "serializeTypeCurrentRPC": "JSON", "version": 453},
                      separators=(",", ":")).encode()


def recv_exact(sock: socket.socket, n: int, deadline: float) -> bytes | None:
    """``n`` bytes, or None when the peer closed first; socket.timeout past ``deadline``."""
    buf = bytearray()
    while len(buf) < n:
        sock.settimeout(max(0.001, deadline - time.monotonic()))
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_frame(sock: socket.socket, deadline: float) -> dict[str, Any] | None:
    """The next frame's JSON header (None when the peer closed)."""
    head = recv_exact(sock, 4, deadline)
    if head is None:
        return None
    (length,) = struct.unpack(">i", head)
    rest = recv_exact(sock, length, deadline)
    if rest is None:
        return None
    (word,) = struct.unpack_from(">I", rest, 0)
    header: dict[str, Any] = json.loads(rest[4:4 + (word & 0xFFFFFF)])
    return header


def call(sock: socket.socket, code: int, ext: dict[str, str], opaque: int,
         timeout: float) -> int | None:
    """One request on an open connection: the response's code (None when the peer closed)."""
    sock.sendall(frame(json_header(code, ext, opaque)))
    deadline = time.monotonic() + timeout
    while True:
        header = read_frame(sock, deadline)
        if header is None:
            return None
        if header.get("opaque") == opaque:
            return int(header["code"])


# --- the prober (a process of its own) ------------------------------------------------------------


def probe(http_port: int, remoting_port: int, stop: Any, out: Connection,
          max_s: float) -> None:
    """Every 50 ms: GET /readyz (keep-alive) and a remoting route read (one connection);
    sends back [(monotonic start, "readyz" | "route", ms, ok)]."""
    samples: list[tuple[float, str, float, bool]] = []
    conn: http.client.HTTPConnection | None = None
    sock: socket.socket | None = None
    opaque = 0
    began = time.monotonic()
    tick = began
    while not stop.is_set() and time.monotonic() - began < max_s:
        started = time.monotonic()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, http_port, timeout=PROBE_TIMEOUT_S)
            conn.request("GET", "/readyz")
            resp = conn.getresponse()
            resp.read()
            ok = resp.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
        ms = (time.monotonic() - started) * 1000
        samples.append((started, "readyz", ms, ok and ms <= PROBE_TIMEOUT_S * 1000))
        if not ok and conn is not None:
            conn.close()
            conn = None
        started = time.monotonic()
        opaque += 1
        try:
            if sock is None:
                sock = socket.create_connection((HOST, remoting_port), timeout=PROBE_TIMEOUT_S)
            ok = call(sock, GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}, opaque,
                      PROBE_TIMEOUT_S) == 0
        except (OSError, ValueError):
            ok = False
        ms = (time.monotonic() - started) * 1000
        samples.append((started, "route", ms, ok and ms <= PROBE_TIMEOUT_S * 1000))
        if not ok and sock is not None:
            sock.close()
            sock = None
        tick += PROBE_INTERVAL_S
        now = time.monotonic()
        if tick < now:  # behind (a slow answer): skip the missed ticks
            tick = now
        time.sleep(max(0.0, tick - now))
    if conn is not None:
        conn.close()
    if sock is not None:
        sock.close()
    out.send(samples)
    out.close()


# --- the attacks ----------------------------------------------------------------------------------


class Attack:
    """One sender's bad requests: ``one(i)`` sends the i-th and says (variant, answer, ms)."""

    cap: int | None = None  # requests per sender

    def __init__(self, http_port: int, remoting_port: int) -> None:
        self.http_port = http_port
        self.remoting_port = remoting_port

    def one(self, i: int) -> tuple[str, str, float]:
        raise NotImplementedError

    def expected(self, variant: str, answer: str) -> bool:
        return answer == "400"

    def close(self) -> None:
        pass

    def http(self, method: str, path: str, body: bytes | None,
             timeout: float = 10.0) -> tuple[str, float]:
        started = time.monotonic()
        conn = http.client.HTTPConnection(HOST, self.http_port, timeout=timeout)
        try:
            conn.request(method, path, body=body,
                         headers={"Content-Type": "application/json", "Connection": "close"})
            resp = conn.getresponse()
            resp.read()
            answer = str(resp.status)
        except (OSError, http.client.HTTPException) as exc:
            answer = type(exc).__name__
        finally:
            conn.close()
        return answer, (time.monotonic() - started) * 1000

    def remoting_once(self, data: bytes, timeout: float) -> tuple[str, float]:
        """A connection of its own: send, then read until the worker closes it (or answers
        and keeps it open for 1 s more)."""
        started = time.monotonic()
        deadline = started + timeout
        try:
            with socket.create_connection((HOST, self.remoting_port), timeout=timeout) as sock:
                try:
                    sock.sendall(data)
                except OSError as exc:  # the worker closed it before the frame's end
                    return f"{type(exc).__name__} while sending", \
                        (time.monotonic() - started) * 1000
                header = read_frame(sock, deadline)
                if header is None:
                    return "closed", (time.monotonic() - started) * 1000
                ms = (time.monotonic() - started) * 1000
                try:
                    closed = recv_exact(sock, 1, min(deadline, time.monotonic() + 1.0)) is None
                except OSError:
                    closed = False
                return f"code={header.get('code')}" + ("+closed" if closed else "+open"), ms
        except TimeoutError:
            return "timeout", (time.monotonic() - started) * 1000
        except (OSError, ValueError) as exc:
            return type(exc).__name__, (time.monotonic() - started) * 1000


NESTED = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH


class NestedJsonHttp(Attack):
    ENDPOINTS = (("POST", "/v1/brokers/register"), ("PUT", "/v1/kv/ns/k"),
                 ("POST", "/v1/routes/watch"), ("PUT", "/v1/namesrv-config"))

    def one(self, i: int) -> tuple[str, str, float]:
        method, path = self.ENDPOINTS[i % len(self.ENDPOINTS)]
        return (f"{method} {path}", *self.http(method, path, NESTED))


def huge_header(size: int) -> bytes:
    return frame(b'{"code":105,"extFields":"' + b"A" * size
                 + b'","flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON",'
                 b'"version":453}')


class HugeHeaderRemoting(Attack):
    """Alternately a header over the worker's 1 MiB limit (refused as its length arrives: the
    worker may close the connection while the frame is still being sent) and one just under
    it (decoded, then refused)."""

    cap = HUGE_CAP
    FRAMES = (("extFields: 8 MiB string", huge_header(HUGE_BYTES)),
              ("extFields: 900 KiB string", huge_header(UNDER_LIMIT_BYTES)))

    def one(self, i: int) -> tuple[str, str, float]:
        variant, data = self.FRAMES[i % len(self.FRAMES)]
        return (variant, *self.remoting_once(data, 15.0))

    def expected(self, variant: str, answer: str) -> bool:
        return answer == "closed" or answer.endswith("while sending") or (
            answer.startswith("code=") and not answer.startswith("code=0+"))


def complete(answer: bytes) -> bool:
    """An HTTP answer's head and its Content-Length of body are in."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length" and value.strip().isdigit():
            return len(body) >= int(value.strip())
    return False  # no length: read until closed


class MalformedHttp(Attack):
    REQUESTS = (
        ("HTTP/9.9", b"GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
        ("request line > 8190 bytes",
         b"GET /" + b"a" * 8200 + b" HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("bad header token", b"GET /readyz HTTP/1.1\r\nHo st: x\r\n\r\n"),
        ("Content-Length: abc",
         b"POST /v1/brokers/register HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
    )

    def one(self, i: int) -> tuple[str, str, float]:
        variant, data = self.REQUESTS[i % len(self.REQUESTS)]
        started = time.monotonic()
        deadline = started + 5.0
        got = b""
        try:
            with socket.create_connection((HOST, self.http_port), timeout=5.0) as sock:
                sock.sendall(data)
                while time.monotonic() < deadline and len(got) < 65536 and not complete(got):
                    sock.settimeout(max(0.001, deadline - time.monotonic()))
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    got += chunk
        except TimeoutError:
            pass
        except OSError as exc:
            if not got:
                return variant, type(exc).__name__, (time.monotonic() - started) * 1000
        ms = (time.monotonic() - started) * 1000
        parts = got.split(b"\r\n", 1)[0].split()
        if len(parts) >= 2 and parts[0].startswith(b"HTTP/"):
            return variant, parts[1].decode(errors="replace"), ms
        return variant, "no answer" if not got else "not HTTP", ms


class KvNames(Attack):
    HTTP_NAMES = (("ns%00x", "k"), ("ns", "k%0Ay"), ("ns", "k%09y"), ("n%7Fs", "k"),
                  ("ns%0D%0Ax", "k%00"))
    REMOTING: ClassVar[tuple[tuple[str, dict[str, str]], ...]] = (
        ("namespace with NUL", {"namespace": "ns\u0000x", "key": "k", "value": "v"}),
        ("key with LF", {"namespace": "ns", "key": "k\ny", "value": "v"}),
        ("no value", {"namespace": "ns", "key": "k"}))

    def __init__(self, http_port: int, remoting_port: int) -> None:
        super().__init__(http_port, remoting_port)
        self.sock: socket.socket | None = None
        self.opaque = 0

    def one(self, i: int) -> tuple[str, str, float]:
        n = len(self.HTTP_NAMES) + len(self.REMOTING)
        k = i % n
        if k < len(self.HTTP_NAMES):
            ns, key = self.HTTP_NAMES[k]
            return (f"HTTP /v1/kv/{ns}/{key}",
                    *self.http("PUT", f"/v1/kv/{ns}/{key}", b'{"value":"v"}'))
        variant, ext = self.REMOTING[k - len(self.HTTP_NAMES)]
        started = time.monotonic()
        self.opaque += 1
        try:
            if self.sock is None:
                self.sock = socket.create_connection((HOST, self.remoting_port), timeout=5.0)
            code = call(self.sock, PUT_KV_CONFIG, ext, self.opaque, 5.0)
            answer = "closed" if code is None else f"code={code}"
        except (OSError, ValueError) as exc:
            answer = type(exc).__name__
            code = None
        if code is None and self.sock is not None:
            self.sock.close()
            self.sock = None
        return f"PUT_KV_CONFIG {variant}", answer, (time.monotonic() - started) * 1000

    def expected(self, variant: str, answer: str) -> bool:
        if variant.startswith("PUT_KV_CONFIG"):
            return answer.startswith("code=") and answer != "code=0"
        return answer == "400"

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()


class DeepJsonRemoting(Attack):
    FRAME = frame(NESTED)

    def one(self, i: int) -> tuple[str, str, float]:
        return ("header nested 100,000 deep", *self.remoting_once(self.FRAME, 5.0))

    def expected(self, variant: str, answer: str) -> bool:
        return answer == "closed" or (answer.startswith("code=") and
                                      not answer.startswith("code=0+"))


ATTACKS: dict[str, type[Attack]] = {
    "nested_json_http": NestedJsonHttp, "huge_header_remoting": HugeHeaderRemoting,
    "malformed_http": MalformedHttp, "kv_names": KvNames,
    "deep_json_remoting": DeepJsonRemoting}


def run_attack(kind: type[Attack], http_port: int, remoting_port: int, senders: int,
               seconds: float) -> dict[str, Any]:
    """``senders`` threads sending ``kind``'s requests for ``seconds``."""
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    answers: dict[str, Counter[str]] = {}
    latencies: list[float] = []
    unexpected = 0

    def sender(s: int) -> None:
        nonlocal unexpected
        attack = kind(http_port, remoting_port)
        i = s  # senders start at different variants
        try:
            while time.monotonic() < deadline and (kind.cap is None or i - s < kind.cap):
                variant, answer, ms = attack.one(i)
                i += 1
                with lock:
                    answers.setdefault(variant, Counter())[answer] += 1
                    latencies.append(ms)
                    unexpected += not attack.expected(variant, answer)
        finally:
            attack.close()

    threads = [threading.Thread(target=sender, args=(s,), daemon=True) for s in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)
    totals: Counter[str] = Counter()
    for counts in answers.values():
        totals.update(counts)
    return {"sent": len(latencies), "answers": dict(totals),
            "by_variant": {v: dict(c) for v, c in answers.items()},
            "not_refused_as_expected": unexpected,
            "answer_ms": summary(latencies) if latencies else None}


# --- around the attacks ---------------------------------------------------------------------------


def post_broker(http_port: int) -> int:
    conn = http.client.HTTPConnection(HOST, http_port, timeout=10)
    try:
        conn.request("POST", "/v1/brokers/register", body=json.dumps(BROKER).encode(),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        conn.close()


def every(interval: float, stop: threading.Event, fn: Callable[[], None]) -> threading.Thread:
    """``fn`` every ``interval`` s until ``stop``, in a daemon thread."""
    def loop() -> None:
        while not stop.wait(interval):
            fn()
    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def log_stats(data: bytes) -> dict[str, Any]:
    lines = data.splitlines()
    return {"lines": len(lines), "traceback_lines": sum(b"Traceback" in ln for ln in lines),
            "longest_line_bytes": max((len(ln) for ln in lines), default=0)}


def control_keys(url: str) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(count=1000))
    finally:
        client.close()
    bad = [k for k in keys if any(b in CONTROL for b in k)]
    return {"keys": len(keys), "control_char_keys": len(bad),
            "examples": [repr(k)[:200] for k in bad[:5]]}


def phase_of(t: float, phases: list[tuple[str, float, float]]) -> str | None:
    for name, t0, t1 in phases:
        if t0 <= t < t1:
            return name
    return None


def run(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    classes = args.classes.split(",")
    for name in classes:
        if name not in ATTACKS:
            raise SystemExit(f"unknown class {name!r}; known: {', '.join(CLASSES)}")
    log = base / "worker.log"
    server = RedisServer(data_dir=base / "redis", appendonly=False).start()
    proc: Any = None
    prober: Any = None
    stop = threading.Event()
    ctx = multiprocessing.get_context("spawn")
    probe_stop = ctx.Event()
    try:
        proc, http_port, remoting_port = start_worker(server.url, log)
        status = post_broker(http_port)
        if status != 200:
            raise RuntimeError(f"registration answered {status}: {log.read_text()[-2000:]}")
        heartbeats: list[int] = []
        every(HEARTBEAT_S, stop, lambda: heartbeats.append(post_broker(http_port)))
        worker = psutil.Process(proc.pid)
        rss: list[tuple[float, float]] = []

        def sample_rss() -> None:
            with contextlib.suppress(psutil.Error):
                rss.append((time.monotonic(), worker.memory_info().rss / 2**20))

        sample_rss()
        rss_start = rss[-1][1]
        every(RSS_INTERVAL_S, stop, sample_rss)
        planned = args.seconds * (1 + len(classes)) + args.gap * len(classes) + args.settle
        receive, send = ctx.Pipe(duplex=False)
        prober = ctx.Process(target=probe, args=(http_port, remoting_port, probe_stop, send,
                                                 planned + 300), daemon=True)
        prober.start()
        send.close()
        time.sleep(1.0)  # the prober's interpreter starting up

        phases: list[tuple[str, float, float]] = []
        offsets: list[tuple[str, int]] = []

        def quiet(name: str, seconds: float) -> None:
            t0 = time.monotonic()
            time.sleep(seconds)
            phases.append((name, t0, time.monotonic()))

        quiet("idle", args.seconds)
        attack_log_start = log.stat().st_size
        attacks: dict[str, dict[str, Any]] = {}
        for name in classes:
            offsets.append((name, log.stat().st_size))
            t0 = time.monotonic()
            attacks[name] = run_attack(ATTACKS[name], http_port, remoting_port, args.senders,
                                       args.seconds)
            attacks[name]["seconds"] = round(time.monotonic() - t0, 2)
            phases.append((name, t0, time.monotonic()))
            quiet("idle", args.gap)
        offsets.append(("after", log.stat().st_size))
        quiet("after", args.settle)
        sample_rss()
        rss_after = rss[-1][1]
        attack_log_end = log.stat().st_size

        probe_stop.set()
        samples: list[tuple[float, str, float, bool]] = (
            receive.recv() if receive.poll(30) else [])
        prober.join(10)
        stop.set()
        alive = proc.poll() is None

        data = log.read_bytes()
        during = data[attack_log_start:attack_log_end]
        sent = sum(a["sent"] for a in attacks.values())
        for i, (name, start) in enumerate(offsets[:-1]):
            lines = data[start:offsets[i + 1][1]].count(b"\n")
            attacks[name]["log_lines"] = lines
            attacks[name]["log_lines_per_request"] = (
                round(lines / attacks[name]["sent"], 4) if attacks[name]["sent"] else None)

        latency: dict[str, dict[str, Any]] = {}
        for name in ["idle", *classes, "after"]:
            mine = [s for s in samples if phase_of(s[0], phases) == name]
            for kind in ("readyz", "route"):
                all_ms = [ms for _, k, ms, _ in mine if k == kind]  # failures included
                latency.setdefault(name, {})[f"{kind}_ms"] = summary(all_ms) if all_ms else None
                latency[name][f"{kind}_failures"] = sum(
                    1 for _, k, _, good in mine if k == kind and not good)
        for name in classes:
            t0, t1 = next((p[1], p[2]) for p in phases if p[0] == name)
            attacks[name]["rss_peak_mib"] = round(
                max((m for t, m in rss if t0 <= t <= t1), default=0.0), 1)
            attacks[name].update(latency[name])

        stats = log_stats(during)
        whole = log_stats(data)
        out = {
            "setup": {"http_port": http_port, "remoting_port": remoting_port,
                      "registration_status": status, "heartbeat_statuses": heartbeats},
            "prober": {"interval_ms": PROBE_INTERVAL_S * 1000, "timeout_s": PROBE_TIMEOUT_S,
                       "readyz": "one keep-alive HTTP/1.1 connection (http.client), a new one "
                                 "after a failure; a separate process",
                       "route": "remoting GET_ROUTEINFO_BY_TOPIC on one persistent connection",
                       "samples": len(samples)},
            "classes": attacks,
            "idle": latency["idle"],
            "after": latency["after"],
            "rss_mib": {"start": round(rss_start, 1),
                        "peak": round(max(m for _, m in rss), 1),
                        "after": round(rss_after, 1), "after_s": args.settle},
            "log": {"bytes_during_attacks": len(during),
                    "lines_during_attacks": stats["lines"],
                    "bad_requests": sent,
                    "lines_per_bad_request": round(stats["lines"] / sent, 4) if sent else None,
                    "traceback_lines_during_attacks": stats["traceback_lines"],
                    "traceback_lines_whole_log": whole["traceback_lines"],
                    "longest_line_bytes_during_attacks": stats["longest_line_bytes"],
                    "longest_line_bytes_whole_log": whole["longest_line_bytes"],
                    "sample_lines": [ln[:300].decode(errors="replace")
                                     for ln in during.splitlines()[:8]]},
            "redis": control_keys(server.url),
            "worker_alive_at_end": alive,
        }
    finally:
        stop.set()
        probe_stop.set()
        if prober is not None and prober.is_alive():
            prober.join(5)
            if prober.is_alive():
                prober.kill()
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        server.stop()
    out["worker_exit_code"] = proc.returncode if proc is not None else None
    out["targets"] = targets(out, classes)
    out["all_targets_met"] = all(t["met"] for t in out["targets"].values())
    return out


def targets(out: dict[str, Any], classes: list[str]) -> dict[str, dict[str, Any]]:
    got: dict[str, dict[str, Any]] = {}

    def add(name: str, target: str, value: Any, met: bool) -> None:
        got[name] = {"target": target, "value": value, "met": bool(met)}

    for name in classes:
        c = out["classes"][name]
        for kind in ("readyz", "route"):
            s = c[f"{kind}_ms"]
            p99 = s["p99"] if s else None
            add(f"{name}.{kind}_p99_ms", f"<= {P99_MAX_MS:g}", p99,
                p99 is not None and p99 <= P99_MAX_MS)
            add(f"{name}.{kind}_failures", "== 0", c[f"{kind}_failures"],
                c[f"{kind}_failures"] == 0)
    rss = out["rss_mib"]
    add("rss_after_over_start", f"<= {RSS_GROWTH_MAX:g}", round(rss["after"] / rss["start"], 3),
        rss["after"] <= RSS_GROWTH_MAX * rss["start"])
    log = out["log"]
    add("traceback_lines", "== 0", log["traceback_lines_whole_log"],
        log["traceback_lines_whole_log"] == 0)
    per = log["lines_per_bad_request"]
    add("log_lines_per_bad_request", f"<= {LINES_PER_REQUEST_MAX:g}", per,
        per is not None and per <= LINES_PER_REQUEST_MAX)
    add("longest_log_line_bytes", f"<= {LINE_BYTES_MAX}", log["longest_line_bytes_whole_log"],
        log["longest_line_bytes_whole_log"] <= LINE_BYTES_MAX)
    add("redis_control_char_keys", "== 0", out["redis"]["control_char_keys"],
        out["redis"]["control_char_keys"] == 0)
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    parser.add_argument("--seconds", type=float, default=5.0, help="each attack class's run")
    parser.add_argument("--gap", type=float, default=2.0, help="quiet between classes")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after the last attack before RSS 'after' is read")
    parser.add_argument("--senders", type=int, default=4, help="concurrent senders per class")
    parser.add_argument("--classes", default=",".join(CLASSES),
                        help="comma-separated attack classes, in order")
    args = parser.parse_args()
    results = new_results(args)
    with tempfile.TemporaryDirectory() as tmp:
        results.update(run(args, Path(tmp)))
    write_results("bad_input", results)


if __name__ == "__main__":
    main()
