"""``nsfleet admin address-server``: what the fleet's address server (``GET /rocketmq/nsaddr``)
answers, and its fixed extra addresses (fleet-wide, in Redis: every worker answers the same at
once, and clients pick the change up at their next fetch, every 2 minutes). HTTP API only."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from nsfleet.admin import tables
from nsfleet.admin.commands import Output
from nsfleet.client.http_name_service import HttpNameService
from nsfleet.client.name_service import NameService


async def address_server(api: NameService, args: argparse.Namespace) -> Output:
    if not isinstance(api, HttpNameService):
        raise ValueError("address-server speaks the HTTP API: use --server http://HOST:8080")
    if args.address_action == "show":
        data = (await api.http.request("GET", "/v1/address-server")).json()
        rows = [(a, "worker") for a in data["workers"]] + [(a, "extra") for a in data["extra"]]
        return Output(data, [tables.pairs_table("Address server (GET /rocketmq/nsaddr)",
                                                ("Address", "Source"), rows),
                             Text(f"answer: {data['nsaddr']}")])
    if args.address_action in ("set", "clear"):
        reply = await api.http.request("PUT", "/v1/address-server/extra",
                                       json_body={"addresses": getattr(args, "addresses", [])})
    else:
        field = "add" if args.address_action == "add" else "remove"
        reply = await api.http.request("POST", "/v1/address-server/extra",
                                       json_body={field: args.addresses})
    data = reply.json()
    return Output(data, [Text("extra addresses: " + (", ".join(data["extra"]) or "(none)"))])


# What `nsfleet admin address-server --help` shows: plain text for a terminal.
DESCRIPTION = ("What the fleet's address server (GET /rocketmq/nsaddr) answers, and its fixed "
               "extra addresses (fleet-wide, in Redis: every worker answers the same at once, and "
               "clients pick the change up at their next fetch, every 2 minutes). HTTP API only.")


def add_parser(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = sub.add_parser(
        "address-server", parents=[common], allow_abbrev=False,
        help="the address server's answer and its fixed extra addresses (fleet-wide)",
        description=DESCRIPTION)
    p.set_defaults(handler=address_server)
    actions = p.add_subparsers(dest="address_action", required=True, metavar="ACTION")
    actions.add_parser("show", help="the live workers and the extra addresses", parents=[common],
                       allow_abbrev=False)
    for action, help_ in (("add", "add fixed addresses"), ("remove", "remove fixed addresses"),
                          ("set", "make the fixed addresses exactly these")):
        a = actions.add_parser(action, help=help_, parents=[common], allow_abbrev=False)
        a.add_argument("addresses", nargs="+" if action != "set" else "*", metavar="HOST:PORT",
                       help="remoting addresses the address server lists beside the workers'")
    actions.add_parser("clear", help="remove every fixed address", parents=[common],
                       allow_abbrev=False)
    return p
