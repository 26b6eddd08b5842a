"""``nsfleet`` command line: serve, and the tools built on the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any

from nsfleet import __version__, config
from nsfleet.admin import cli as admin_cli
from nsfleet.analytics import cli as analytics_cli
from nsfleet.domain.errors import ValidationError
from nsfleet.simulate import cli as simulate_cli

# What `nsfleet --help` shows: plain text for a terminal.
DESCRIPTION = ("A horizontally scalable RocketMQ NameServer on Redis: run a worker (serve), and "
               "the tools that talk to a fleet (admin, simulate, analytics). 'nsfleet COMMAND "
               "--help' describes each.")
SERVE_DESCRIPTION = ("Run a worker: the RocketMQ remoting port and the JSON HTTP API over one "
                     "Redis (an embedded redis-server unless --redis-url). Each setting's flag "
                     "also reads an NSFLEET_* variable, named in its help.")


class _Subcommand(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its own error, shown with its
    usage (argparse otherwise hands it up to the top-level parser, whose usage does not help).
    It takes no abbreviated flag (``--broker`` is not ``--brokers``); nested command parsers are
    of this class too, so they inherit that."""

    def __init__(self, *args: Any, allow_abbrev: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def _serve(args: argparse.Namespace) -> int:
    try:
        settings = config.load(args)
    except ValidationError as exc:
        print(f"nsfleet serve: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(settings.printable(), indent=2, sort_keys=True))
        return 0
    if args.repair_aof and not settings.embedded_redis:
        print("nsfleet serve: --repair-aof repairs the embedded Redis; with --redis-url, repair "
              "that server's files with its own redis-check-aof", file=sys.stderr)
        return 2
    from nsfleet import logs
    from nsfleet.ports import check_free
    from nsfleet.process_group import ProcessGroup
    from nsfleet.worker import serve

    logs.configure(settings.log_format, settings.log_level, settings.log_file)
    group = ProcessGroup.from_environ()  # one of the supervisor's processes
    if group is None:  # (its siblings hold the ports)
        try:
            check_free(settings)
        except RuntimeError as exc:
            print(f"nsfleet serve: {exc}", file=sys.stderr)
            return 1
    if settings.process_count() > 1:
        from nsfleet import supervisor

        try:
            return supervisor.run(settings, repair_aof=args.repair_aof)
        except Exception as exc:
            print(f"nsfleet serve: {exc}", file=sys.stderr)
            return 1
    if group is not None:
        import structlog

        structlog.contextvars.bind_contextvars(process=group.index)
    from nsfleet.runtime.table_thread import favour_the_event_loop

    favour_the_event_loop()
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # uvloop is optional (not on Windows)
        runner = asyncio.run
    try:
        return runner(serve(settings, group=group, repair_aof=args.repair_aof))
    except Exception as exc:
        logs.flush_folded()  # the worker's folded warnings come before, not after, its end
        print(f"nsfleet serve: {exc}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsfleet", description=DESCRIPTION,
                                     allow_abbrev=False)
    parser.add_argument("--version", action="version", version=f"nsfleet {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Subcommand)
    serve = sub.add_parser("serve", help="run a worker (embedded Redis unless --redis-url)",
                           description=SERVE_DESCRIPTION, allow_abbrev=False)
    start = config.add_arguments(serve)[config.START]
    start.add_argument("--print-config", action="store_true",
                       help="print the effective settings as JSON and exit")
    start.add_argument("--repair-aof", action="store_true",
                       help="before starting the embedded Redis, keep a copy of its append-only "
                            "file and truncate it after its last whole command (the server's "
                            "own check-aof): for a start that failed on a corrupt AOF")
    serve.set_defaults(func=_serve)
    admin_cli.add_parser(sub)
    simulate_cli.add_parser(sub)
    analytics_cli.add_parser(sub).set_defaults(func=analytics_cli.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args))
    except KeyboardInterrupt:  # Ctrl-C before the command's own handler is in place
        return 130
