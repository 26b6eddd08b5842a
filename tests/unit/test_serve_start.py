"""``nsfleet serve``'s start, before anything runs: the ports checked (the flag named), the data
dir shown by --print-config, typos answered with the subcommand's own usage, and the server's
name in the log (Valkey says so)."""

from __future__ import annotations

import json
import socket
import sys
from typing import Any

import pytest

from nsfleet import cli
from nsfleet.config import Settings, default_data_dir
from nsfleet.ports import PortTaken, check_free
from nsfleet.redis_conn import _check_one, server_name
from nsfleet.redis_server import free_port
from nsfleet.runtime.table_thread import GIL_SWITCH_S


def test_free_ports_pass_and_port_zero_is_not_checked() -> None:
    check_free(Settings(host="127.0.0.1", http_port=free_port(), remoting_port=0,
                        metrics_port=0))


@pytest.mark.parametrize("name", ["http_port", "remoting_port", "metrics_port"])
def test_a_taken_port_names_its_flag(name: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"http_port": free_port(), "remoting_port": free_port(), "metrics_port": 0,
                 name: port}
        with pytest.raises(PortTaken) as caught:
            check_free(Settings(host="127.0.0.1", **ports))  # type: ignore[arg-type]
    flag = "--" + name.replace("_", "-")
    message = str(caught.value)
    assert message.startswith(f"{flag} {port}: 127.0.0.1:{port} is taken")
    assert f"NSFLEET_{name.upper()}" in message and "\n" not in message


def test_print_config_shows_the_data_dir_in_use(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("NSFLEET_REDIS_URL", "NSFLEET_DATA_DIR"):
        monkeypatch.delenv(var, raising=False)
    assert cli.main(["serve", "--print-config"]) == 0
    assert json.loads(capsys.readouterr().out)["data_dir"] == default_data_dir() != ""
    assert cli.main(["serve", "--print-config", "--data-dir", "/srv/ns"]) == 0
    assert json.loads(capsys.readouterr().out)["data_dir"] == "/srv/ns"


@pytest.mark.parametrize("argv", [
    ["serve", "--htp-port", "1"],
    ["simulate", "--no-such-flag"],
    ["admin", "namesrv-config", "get", "--no-such-flag"],
    ["analytics", "--no-such-flag"],
])
def test_a_typo_shows_the_subcommands_usage(argv: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    prog = "nsfleet " + " ".join(a for a in argv if not a.startswith("-") and a != "1")
    assert f"usage: {prog}" in err
    assert f"{prog}: error: unrecognized arguments: {' '.join(argv[len(prog.split()) - 1:])}" \
        in err


def test_the_log_names_valkey_with_its_own_version() -> None:
    valkey = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "9.1.2",
              "maxmemory_policy": "noeviction"}
    assert server_name(valkey) == "valkey 9.1.2"
    assert _check_one(valkey)["server"] == "valkey 9.1.2"
    assert server_name({"redis_version": "6.2.5"}) == "redis 6.2.5"


def test_a_worker_process_hands_its_event_loop_the_gil_within_a_millisecond(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The table thread (nsfleet.runtime.table_thread) gives way to the loop after
    GIL_SWITCH_S, not CPython's 5 ms, in the process `nsfleet serve` runs a worker in."""
    seen: list[float] = []

    async def serve(settings: Settings, **kwargs: Any) -> int:
        seen.append(sys.getswitchinterval())
        return 0

    monkeypatch.setattr("nsfleet.worker.serve", serve)
    before = sys.getswitchinterval()
    try:
        assert cli.main(["serve", "--http-port", str(free_port()),
                         "--remoting-port", str(free_port())]) == 0
    finally:
        sys.setswitchinterval(before)
    assert seen == [GIL_SWITCH_S] and GIL_SWITCH_S < 0.005
