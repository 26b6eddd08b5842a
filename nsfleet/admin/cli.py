"""``nsfleet admin``'s command line: the commands and their options, one request through a
``client/`` name service, and what is printed (tables, or JSON with ``--json``) and exited with.

On failure: exit status 1 and one line on stderr naming the protocol and addresses tried; 2 for
a usage error. mqadmin sends KV, write-perm and delete-topic writes to every NameServer in its
list; here the workers share one Redis, so one successful request reaches the whole fleet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from rich.console import Console

from nsfleet.admin import address_list, commands, controller_commands, copy_config, diff
from nsfleet.client.connection import ConnectOptions, add_connection_options
from nsfleet.client.credentials import TOKEN_ENV
from nsfleet.client.http import DEFAULT_SERVER, SERVER_ENV, ApiError, FleetUnavailable
from nsfleet.client.name_service import open_name_service
from nsfleet.client.remoting import RemotingUnavailable

DESCRIPTION = """\
mqadmin's NameServer and controller commands, over an nsfleet worker's HTTP API (--server
URL[,URL...]) or over the RocketMQ remoting protocol (-n host:9876[;host:9876], as mqadmin;
works against a Java NameServer too). Tables by default, JSON with --json. Both fail over
through their list.
Exit status 1 with one line on stderr on failure, 2 on a usage error."""
CONNECTION = "connection"
# Each command's help names the shared options instead of listing them again.
CONNECTION_NOTE = ("accepted here too: the connection options of 'nsfleet admin --help' "
                   "(--server, -n, --tls*, --access-key, --secret-key-file, --token-file, "
                   "--timeout)")


def _common(shown: bool) -> argparse.ArgumentParser:
    """The options every admin command takes, before or after its name (SUPPRESS keeps an option
    given at one level from being reset by the other's default). ``shown``: listed in the help
    (admin's own), else named in one line (each command's)."""
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    group = p.add_argument_group(CONNECTION, "any admin command takes these, before or after "
                                 "its name" if shown else CONNECTION_NOTE)

    def shown_help(text: str) -> str:
        return text if shown else argparse.SUPPRESS

    group.add_argument("--server", default=argparse.SUPPRESS, metavar="URL[,URL...]",
                       help=shown_help(f"worker HTTP URL(s), comma-separated, tried in order "
                                       f"(env {SERVER_ENV}, default {DEFAULT_SERVER})"))
    group.add_argument("--namesrv-addr", "-n", default=argparse.SUPPRESS,
                       metavar="HOST:PORT[;...]",
                       help=shown_help("speak the RocketMQ remoting protocol to these NameServer "
                                       "addresses (mqadmin's -n), instead of the HTTP API"))
    add_connection_options(group, signs_as="requests, as mqadmin with conf/tools.yml",
                           suppress=True, shown=shown)
    p.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                   help="print the worker's JSON instead of tables")
    return p


def _change_limit(raw: str) -> int:
    try:
        limit = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number") from None
    if not 1 <= limit <= 1000:
        raise argparse.ArgumentTypeError("must be between 1 and 1000")
    return limit


def _action(sub: Any, common: argparse.ArgumentParser, name: str,
            help_: str) -> argparse.ArgumentParser:
    """A command, or an action of a command with actions (kv get, order-conf put, ...)."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_, description=help_,
                                                parents=[common], allow_abbrev=False)
    return p


def _command(sub: Any, common: argparse.ArgumentParser, name: str, help_: str,
             handler: commands.Command) -> argparse.ArgumentParser:
    p = _action(sub, common, name, help_)
    p.set_defaults(handler=handler)
    return p


TOPIC = "the topic's name"
BROKER = "the broker group's name (brokerName), e.g. broker-a"
CLUSTER = "only this cluster's"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    admin: argparse.ArgumentParser = subparsers.add_parser(
        "admin", parents=[_common(shown=True)], help="mqadmin-style commands against a fleet",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False)
    admin.set_defaults(func=run)
    common = _common(shown=False)
    sub = admin.add_subparsers(dest="admin_command", required=True, metavar="COMMAND")
    c = commands
    _command(sub, common, "cluster-list", "clusters, broker groups and members (clusterList)",
             c.cluster_list)
    _command(sub, common, "broker-list", "live brokers with last heartbeat age and deadline",
             c.broker_list)
    _command(sub, common, "topic-route", "a topic's route (topicRoute)",
             c.topic_route).add_argument("topic", help=TOPIC)
    _command(sub, common, "topic-list", "all topics, or a cluster's (topicList)",
             c.topic_list).add_argument("--cluster", "-c", help=f"{CLUSTER} topics")
    _command(sub, common, "topic-cluster-list", "the clusters serving a topic (topicClusterList)",
             c.topic_cluster_list).add_argument("topic", help=TOPIC)
    p = _command(sub, common, "delete-topic", "delete a topic from the fleet's route table, or "
                 "only a cluster's queues (deleteTopic, NameServer side)", c.delete_topic)
    p.add_argument("topic", help=TOPIC)
    p.add_argument("--cluster", "-c", help=f"delete {CLUSTER} queues of the topic")
    _command(sub, common, "changes", "the fleet's recent changes, newest first: registrations "
             "that changed something, expiries, unregisters, perm, KV and config changes, with "
             "time and worker (HTTP only)", c.changes).add_argument(
        "--limit", type=_change_limit, default=50, metavar="N",
        help="how many (1-1000, default 50)")
    _command(sub, common, "wipe-write-perm", "clear the write perm of a broker group's queues "
             "(wipeWritePerm)", c.wipe_write_perm).add_argument("broker", help=BROKER)
    _command(sub, common, "add-write-perm", "restore the write perm of a broker group's queues "
             "(addWritePerm)", c.add_write_perm).add_argument("broker", help=BROKER)

    kv = _command(sub, common, "kv", "KV config (updateKvConfig, deleteKvConfig, ...)", c.kv)
    kv_sub = kv.add_subparsers(dest="kv_action", required=True, metavar="ACTION")
    kv_args = {"namespace": "the KV namespace, e.g. ORDER_TOPIC_CONFIG",
               "key": "the key in the namespace", "value": "the value to set"}
    for action, help_, extra in (("get", "print a value", ["key"]),
                                 ("put", "set a value", ["key", "value"]),
                                 ("delete", "delete a key", ["key"]),
                                 ("list", "a namespace's table", [])):
        p = _action(kv_sub, common, action, help_)
        for arg in ["namespace", *extra]:
            p.add_argument(arg, help=kv_args[arg])

    oc = _command(sub, common, "order-conf", "orderTopicConf of a topic, the ORDER_TOPIC_CONFIG "
                  "namespace (updateOrderConf)", c.order_conf)
    oc_sub = oc.add_subparsers(dest="order_action", required=True, metavar="ACTION")
    for action, help_ in (("get", "print a topic's orderTopicConf"),
                          ("put", "set it, e.g. 'broker-a:4;broker-b:4'"),
                          ("delete", "delete it")):
        p = _action(oc_sub, common, action, help_)
        p.add_argument("topic", help=TOPIC)
        if action == "put":
            p.add_argument("conf", help="broker groups and their queue counts, "
                                        "'broker-a:4;broker-b:4'")
    nc = _command(sub, common, "namesrv-config", "the fleet's NameServer config "
                  "(getNamesrvConfig, updateNamesrvConfig)", c.namesrv_config)
    nc_sub = nc.add_subparsers(dest="config_action", required=True, metavar="ACTION")
    _action(nc_sub, common, "get", "every key and value")
    p = _action(nc_sub, common, "set", "set key=value pairs fleet-wide")
    p.add_argument("pairs", nargs="+", metavar="key=value",
                   help="NamesrvConfig keys and their new values, e.g. orderMessageEnable=true")
    _controller_commands(sub, common)
    address_list.add_parser(sub, common)
    diff.add_parser(sub, common)  # these two exit with their own statuses (their ``func``)
    copy_config.add_parser(sub, common)
    return admin


BROKER_SET = "the broker set's name (brokerName), e.g. broker-a"


def _controller_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """RocketMQ 5's controller (brokers in controller mode), served by every nsfleet worker."""
    c = controller_commands
    _command(sub, common, "controller-metadata", "the controller's leader and peers "
             "(getControllerMetaData)", c.controller_metadata)
    _command(sub, common, "sync-state-set", "controller broker sets: master, epochs, "
             "SyncStateSet and replicas (getSyncStateSet)", c.sync_state_set).add_argument(
        "broker_names", nargs="*", metavar="BROKER_NAME",
        help="broker sets to show (default: every set, HTTP only; -n needs names)")
    _command(sub, common, "controller-config", "the controller's config (getControllerConfig)",
             c.controller_config)
    p = _command(sub, common, "update-controller-config", "change the controller's config on "
                 "every worker (updateControllerConfig): enableElectUncleanMaster, "
                 "notifyBrokerRoleChanged", c.update_controller_config)
    p.add_argument("pairs", nargs="+", metavar="KEY=VALUE", type=c.key_value,
                   help="a setting and its value, e.g. enableElectUncleanMaster=true")
    p = _command(sub, common, "elect-master", "make a replica its broker set's master "
                 "(electMaster); refused with code 2011 when it is the master already, 2012 "
                 "when it cannot be (not alive, or not in sync)", c.elect_master)
    p.add_argument("broker_name", metavar="BROKER_NAME", help=BROKER_SET)
    p.add_argument("broker_id", metavar="BROKER_ID", type=c.broker_id,
                   help="the replica's controller broker id (1, 2, ...)")
    p = _command(sub, common, "clean-broker-metadata", "remove replicas, or a whole broker set, "
                 "from the controller (cleanBrokerMetadata)", c.clean_broker_metadata)
    p.add_argument("broker_name", metavar="BROKER_NAME", help=BROKER_SET)
    p.add_argument("--broker-ids", type=c.broker_ids, metavar="ID[;ID...]",
                   help="only these replicas, e.g. '1;2' (default: the whole set)")
    p.add_argument("--clean-living", action="store_true",
                   help="clean the whole set even while alive or while it has a master "
                        "(cleanLivingBroker: as in Java, it cleans the whole set, so it does not "
                        "go with --broker-ids)")
    p = _command(sub, common, "controller-import", "copy broker sets from a Java controller "
                 "into the fleet: ids, master and epochs (docs/controller.md, moving a running "
                 "set; through the HTTP API)", c.controller_import)
    p.add_argument("broker_names", nargs="*", metavar="BROKER_NAME",
                   help="sets to import (default: every brokerName in the fleet's routes)")
    p.add_argument("--from", dest="source", required=True, metavar="HOST:PORT",
                   help="the Java controller's address (controllerAddr; an embedded one "
                        "listens beside its NameServer, e.g. :9878)")
    p.add_argument("--grace", type=c.grace_seconds, default=150.0, metavar="SECONDS",
                   help="how long a replica the Java controller saw alive counts alive on the "
                        "fleet before its own heartbeats arrive (default 150: brokers re-read "
                        "controllerAddr every 2 minutes)")
    p.add_argument("--cluster", metavar="CLUSTER",
                   help="the sets' cluster when the fleet's routes do not name it")


async def _execute(args: argparse.Namespace) -> commands.Output:
    servers = getattr(args, "server", None) or os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    api = open_name_service(getattr(args, "namesrv_addr", None) or servers,
                            ConnectOptions.from_args(args))
    try:
        return await args.handler(api, args)
    finally:
        await api.close()


def _unavailable(exc: FleetUnavailable) -> str:
    """One line. A worker that answered (a 5xx) is reported as such; the hint about the remoting
    port is only for an address that gave no HTTP answer at all."""
    answers = exc.answers
    if answers and all(url in answers for url, _ in exc.errors):
        if len(answers) == 1:
            ((url, (status, text)),) = answers.items()
            return f"the worker answered: {_one_line(text)} (HTTP {status} from {url})"
        return "every worker answered with an error: " + "; ".join(
            f"{url}: {_one_line(text)} (HTTP {status})" for url, (status, text) in answers.items())
    tried = "; ".join(f"{url}: answered {answers[url][0]} {_one_line(answers[url][1])}"
                      if url in answers else f"{url}: {_one_line(what)}"
                      for url, what in exc.errors)
    what = "answered with success" if answers else "answered"
    return (f"over HTTP, no nsfleet worker {what} ({tried}); for a NameServer's remoting port "
            "(9876) use -n HOST:9876")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def run(args: argparse.Namespace) -> int:
    try:
        out = asyncio.run(_execute(args))
    except FleetUnavailable as exc:
        print(f"nsfleet admin {args.admin_command}: {_unavailable(exc)}", file=sys.stderr)
        return 1
    except (ApiError, RemotingUnavailable, ValueError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the worker sent
        if isinstance(exc, ApiError) and exc.status == 401:
            message += (f" (HTTP 401: give a token with --token-file FILE, or the token itself "
                        f"in env {TOKEN_ENV})")
        print(f"nsfleet admin {args.admin_command}: {message}", file=sys.stderr)
        return 1
    for warning in out.warnings:
        print(f"nsfleet admin {args.admin_command}: warning: {warning}", file=sys.stderr)
    if getattr(args, "json", False):
        print(json.dumps(out.data, indent=2, sort_keys=True))
        return int(out.failed)
    # Wide when piped, so columns are not folded at the 80 columns rich assumes then.
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 200)
    for renderable in out.show:
        console.print(renderable)
    return int(out.failed)
