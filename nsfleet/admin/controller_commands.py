"""``nsfleet admin``'s commands for RocketMQ 5's controller (brokers in controller mode):
mqadmin's getControllerMetaData, getSyncStateSet, getControllerConfig, electMaster and
cleanBrokerMetadata, each through the name service's ``controller`` (HTTP or remoting). A
refusal is an ApiError with Java's code and remark: exit status 1."""

from __future__ import annotations

import argparse
from typing import Any

from rich.text import Text

from nsfleet.admin import tables
from nsfleet.admin.commands import Output
from nsfleet.client.name_service import NameService


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


def key_value(raw: str) -> str:
    if "=" not in raw or not raw.split("=", 1)[0].strip():
        raise argparse.ArgumentTypeError(f"{raw!r} is not KEY=VALUE")
    return raw


def broker_ids(raw: str) -> list[int]:
    """mqadmin's brokerControllerIdsToClean: ``1;2;3``."""
    return [broker_id(part.strip()) for part in raw.split(";") if part.strip()]
