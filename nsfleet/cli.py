"""``nsfleet`` command line: serve, and the tools built on the HTTP API."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from nsfleet import __version__, admin, config, simulate
from nsfleet.analytics import cli as analytics_cli
from nsfleet.domain.errors import ValidationError


def _serve(args: argparse.Namespace) -> int:
    try:
        settings = config.load(args)
    except ValidationError as exc:
        print(f"nsfleet serve: {exc}", file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(settings.printable(), indent=2, sort_keys=True))
        return 0
    from nsfleet import logs
    from nsfleet.worker import serve

    logs.configure(settings.log_format, settings.log_level, settings.log_file)
    if settings.process_count() > 1:
        from nsfleet import supervisor

        try:
            return supervisor.run(settings)
        except Exception as exc:
            print(f"nsfleet serve: {exc}", file=sys.stderr)
            return 1
    from nsfleet.process_group import ProcessGroup

    group = ProcessGroup.from_environ()  # one of the supervisor's processes
    if group is not None:
        import structlog

        structlog.contextvars.bind_contextvars(process=group.index)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # uvloop is optional (not on Windows)
        runner = asyncio.run
    try:
        return runner(serve(settings, group=group))
    except Exception as exc:
        print(f"nsfleet serve: {exc}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nsfleet", description=__doc__)
    parser.add_argument("--version", action="version", version=f"nsfleet {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a worker (embedded Redis unless --redis-url)")
    config.add_arguments(serve)
    serve.add_argument("--print-config", action="store_true",
                       help="print the effective settings as JSON and exit")
    serve.set_defaults(func=_serve)
    admin.add_parser(sub)
    simulate.add_parser(sub)
    analytics_cli.add_parser(sub).set_defaults(func=analytics_cli.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))
