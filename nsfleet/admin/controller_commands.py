"""``nsfleet admin``'s commands for RocketMQ 5's controller (brokers in controller mode):
mqadmin's getControllerMetaData, getSyncStateSet, getControllerConfig, electMaster and
cleanBrokerMetadata, each through the name service's ``controller`` (HTTP or remoting), and
controller-import, which copies broker sets from a Java controller. A refusal is an ApiError
with Java's code and remark: exit status 1."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from nsfleet.admin import tables
from nsfleet.admin.commands import Output
from nsfleet.client.connection import ConnectOptions
from nsfleet.client.http import ApiError
from nsfleet.client.name_service import NameService, open_name_service
from nsfleet.client.remoting_controller import NO_REMOTING_IMPORT


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return "-" if value is None else str(value)


async def controller_metadata(api: NameService, args: argparse.Namespace) -> Output:
    meta = await api.controller.metadata()
    return Output(meta, [tables.pairs_table("Controller", ("Key", "Value"),
                                            [(k, _text(v)) for k, v in meta.items()])])


async def controller_config(api: NameService, args: argparse.Namespace) -> Output:
    config = dict(sorted((await api.controller.config()).items()))
    return Output({"config": config}, [tables.pairs_table(
        "Controller config", ("Key", "Value"), sorted(config.items()))])


async def update_controller_config(api: NameService, args: argparse.Namespace) -> Output:
    values = dict(pair.split("=", 1) for pair in args.pairs)
    await api.controller.update_config(values)
    return await controller_config(api, args)


async def sync_state_set(api: NameService, args: argparse.Namespace) -> Output:
    """Names the controller does not know are left out, as GET_SYNC_STATE_DATA leaves them:
    said on stderr."""
    sets = await api.controller.broker_sets(args.broker_names)
    out = Output({"brokerSets": sets}, tables.broker_set_tables(sets))
    known = {s["brokerName"] for s in sets}
    unknown = [n for n in dict.fromkeys(args.broker_names) if n not in known]
    if unknown:
        out.warnings.append(f"the controller knows no broker set {', '.join(unknown)}")
    return out


async def elect_master(api: NameService, args: argparse.Namespace) -> Output:
    s = await api.controller.elect(args.broker_name, args.broker_id)
    return Output(s, [Text(f"broker {s['masterBrokerId']} ({s['masterAddress']}) is the master "
                           f"of {s['brokerName']}, masterEpoch {s['masterEpoch']}"),
                      *tables.broker_set_tables([s])])


async def clean_broker_metadata(api: NameService, args: argparse.Namespace) -> Output:
    ids = args.broker_ids or []
    if ids and args.clean_living:
        # Java ignores the ids with cleanLivingBroker and removes the whole set: refused here,
        # so that naming one replica never wipes its set.
        raise ValueError("--clean-living cleans the whole broker set: drop --broker-ids, or "
                         "drop --clean-living to clean only replicas that are not alive")
    data = await api.controller.clean(args.broker_name, ids, args.clean_living)
    what = (f"replica{'s' if len(ids) > 1 else ''} {';'.join(map(str, ids))} of broker set"
            if ids else "broker set")
    return Output(data, [Text(f"cleaned {what} {args.broker_name} from the controller")])


def broker_id(raw: str) -> int:
    """An argparse type: a broker id, 0 or more (-1 is no id: the controller's own choice)."""
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a broker id") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a broker id")
    return value


def grace_seconds(raw: str) -> float:
    """An argparse type: 1-3600 seconds."""
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a number of seconds") from None
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{raw!r}: give 1-3600 seconds")
    return value


def key_value(raw: str) -> str:
    if "=" not in raw or not raw.split("=", 1)[0].strip():
        raise argparse.ArgumentTypeError(f"{raw!r} is not KEY=VALUE")
    return raw


def broker_ids(raw: str) -> list[int]:
    """mqadmin's brokerControllerIdsToClean: ``1;2;3``."""
    return [broker_id(part.strip()) for part in raw.split(";") if part.strip()]


async def _fleet_clusters(api: NameService) -> dict[str, str]:
    """brokerName -> cluster, from the fleet's routes (the sets' brokers register there)."""
    info = await api.cluster_info()
    return {name: group.get("cluster") or ""
            for name, group in (info.get("brokerAddrTable") or {}).items()}


async def controller_import(api: NameService, args: argparse.Namespace) -> Output:
    """Copy broker sets from a Java controller (GET_SYNC_STATE_DATA at ``--from``) into the
    fleet: ids, addresses, master and both epochs (docs/controller.md, moving a running set).
    Every set is tried; one the fleet has moved past is reported and makes the exit status 1.
    Nothing is written unless every set's cluster is known."""
    if api.protocol != "HTTP":
        raise ValueError(NO_REMOTING_IMPORT)
    clusters = await _fleet_clusters(api)
    names = args.broker_names or sorted(clusters)
    if not names:
        raise ValueError("the fleet's routes name no broker set: name the sets to import")
    source = open_name_service(args.source, ConnectOptions(
        timeout=ConnectOptions.from_args(args).timeout))
    try:
        sets = await source.controller.broker_sets(names)
    finally:
        await source.close()
    sets = [{**s, "clusterName": s.get("clusterName") or clusters.get(s["brokerName"])
             or args.cluster} for s in sets]
    if unknown := [s["brokerName"] for s in sets if not s["clusterName"]]:
        raise ValueError(f"no cluster known for {', '.join(unknown)}: give --cluster "
                         "(nothing imported)")
    out = Output({"imported": [], "held": [], "refused": []})
    found = {s["brokerName"] for s in sets}
    if missing := [n for n in dict.fromkeys(names) if n not in found]:
        out.warnings.append(f"{args.source} knows no broker set {', '.join(missing)}")
    for s in sets:
        try:
            answer = await api.controller.import_set(s, args.grace)
        except ApiError as exc:
            out.data["refused"].append({"brokerName": s["brokerName"], "error": str(exc)})
            out.warnings.append(f"{s['brokerName']} not imported: {exc}")
            continue
        out.data["imported" if answer["imported"] else "held"].append(answer["brokerSet"])
        out.show.append(Text(f"{s['brokerName']}: " + ("imported" if answer["imported"] else
                                                       "the fleet holds it already")))
        out.show.extend(tables.broker_set_tables([answer["brokerSet"]]))
    out.failed = bool(out.data["refused"])
    return out
