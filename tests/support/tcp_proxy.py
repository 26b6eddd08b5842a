"""A TCP proxy on loopback whose connections a test can cut: a network partition between one
worker and Redis, while other clients still reach Redis directly."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading

from nsfleet.redis_server import free_port


class TcpProxy:
    """Forwards 127.0.0.1:``port`` to ``target``. ``cut()`` resets every connection and refuses
    new ones (closed as soon as accepted) until ``restore()``."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._listener.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._cut = False
        self._stop = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tcp-proxy")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for sock in list(self._peers):
                self._close(sock, reset=True)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def stop(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for sock in list(self._peers):
                self._close(sock, reset=True)
        self._listener.close()
        self._selector.close()

    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._selector.select(timeout=0.05):
                with self._lock:
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj in self._peers:
                        self._forward(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._cut:
            _reset(client)
            return
        try:
            upstream = socket.create_connection(self.target, timeout=2)
        except OSError:
            _reset(client)
            return
        for a, b in ((client, upstream), (upstream, client)):
            a.setblocking(False)
            self._peers[a] = b
            self._selector.register(a, selectors.EVENT_READ)

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(sock, reset=False)
            return
        peer = self._peers[sock]
        try:
            peer.setblocking(True)
            peer.sendall(data)
            peer.setblocking(False)
        except OSError:
            self._close(sock, reset=True)

    def _close(self, sock: socket.socket, *, reset: bool) -> None:
        peer = self._peers.pop(sock, None)
        for s in (sock, peer):
            if s is None:
                continue
            self._peers.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(s)
            if reset:
                _reset(s)
            else:
                s.close()


def _reset(sock: socket.socket) -> None:
    """Close with RST, as a dropped link looks to the client's next read or write."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    sock.close()
