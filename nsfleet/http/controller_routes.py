"""RocketMQ 5's controller on the HTTP API: its metadata and config, every broker set with its
master, epochs, SyncStateSet and replicas, and the admin's two writes (mqadmin electMaster and
cleanBrokerMetadata). A refusal is Java's controller code and remark (409; an unknown set asked
for by name, 404), as the remoting port answers it."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from nsfleet.domain import validation
from nsfleet.domain.controller import BrokerSet, Election, Outcome, Replica
from nsfleet.domain.errors import (
    ControllerRefused,
    ResponseCode,
    UnknownBrokerSet,
    ValidationError,
)
from nsfleet.domain.java import to_bool, to_int
from nsfleet.domain.java_properties import format_properties, parse_properties
from nsfleet.http import parse
from nsfleet.service.controller import Controller, still_remark

CONTROLLER_KEY = web.AppKey("controller", Controller)


def _controller(request: web.Request) -> Controller:
    return request.app[CONTROLLER_KEY]


def _set_json(name: str, cluster: str, master_id: int | None, master_address: str,
              master_epoch: int, sync_state_set: tuple[int, ...], sync_state_set_epoch: int,
              replicas: tuple[Replica, ...]) -> dict[str, Any]:
    return {"brokerName": name, "clusterName": cluster, "masterBrokerId": master_id,
            "masterAddress": master_address or None, "masterEpoch": master_epoch,
            "syncStateSet": list(sync_state_set), "syncStateSetEpoch": sync_state_set_epoch,
            "replicas": [{"brokerId": r.broker_id, "brokerAddress": r.address,
                          "alive": r.alive, "inSync": r.broker_id in sync_state_set}
                         for r in replicas]}


def broker_set_json(s: BrokerSet) -> dict[str, Any]:
    return _set_json(s.broker_name, s.cluster, s.master_id, s.master_address, s.master_epoch,
                     s.sync_state_set, s.sync_state_set_epoch, s.replicas)


def election_json(e: Election) -> dict[str, Any]:
    """The set as the election left it."""
    return _set_json(e.broker_name, e.cluster, e.master_id, e.master_address, e.master_epoch,
                     e.sync_state_set, e.sync_state_set_epoch, e.replicas)


async def metadata(request: web.Request) -> web.Response:
    meta = _controller(request).metadata()
    return web.json_response({**meta, "isLeader": meta["isLeader"] == "true"})


async def config(request: web.Request) -> web.Response:
    return web.json_response({"config": parse_properties(_controller(request).config_text())})


async def update_config(request: web.Request) -> web.Response:
    """UPDATE_CONTROLLER_CONFIG: a JSON object of key -> value, as Java Properties text."""
    values = parse.config_values(parse.json_object(await request.read()))
    controller = _controller(request)
    await controller.update_config(format_properties(values))
    return web.json_response({"config": parse_properties(controller.config_text())})


async def broker_sets(request: web.Request) -> web.Response:
    sets = await _controller(request).broker_sets()
    return web.json_response({"brokerSets": [broker_set_json(s) for s in sets]})


async def broker_set(request: web.Request) -> web.Response:
    name = request.match_info["broker_name"]
    found = await _controller(request).sync_state_data([name])
    if not found:
        raise UnknownBrokerSet(name)
    return web.json_response(broker_set_json(found[0]))


def _broker_id(value: Any, field: str) -> int:
    """A broker id as the JSON API reads an integer, but never a boolean (a write naming id
    ``true`` is a mistake) nor negative (-1 is the controller's own trigger, no id at all)."""
    if value is None:
        raise ValidationError(field, "is required")
    if isinstance(value, bool):
        raise ValidationError(field, f"is not a broker id: {value!r}")
    broker_id = to_int(value, field)
    if broker_id < 0:
        raise ValidationError(field, f"is not a broker id: {broker_id}")
    return broker_id


async def elect(request: web.Request) -> web.Response:
    """mqadmin electMaster: the designated broker becomes master if it can; 409 with 2011
    naming the master that stays when that is the choice."""
    name = request.match_info["broker_name"]
    broker_id = _broker_id(parse.json_object(await request.read()).get("brokerId"), "brokerId")
    election = await _controller(request).elect(name, broker_id, designate=True)
    if election.outcome is Outcome.STILL:
        raise ControllerRefused(
            ResponseCode.CONTROLLER_MASTER_STILL_EXIST, still_remark(election),
            f"broker {election.master_id} ({election.master_address}) stays master, "
            f"masterEpoch {election.master_epoch}")
    return web.json_response(election_json(election))


DEFAULT_IMPORT_GRACE_S = 150  # the brokers re-read controllerAddr every 2 minutes


def _epoch(body: dict[str, Any], field: str) -> int:
    value = body.get(field)
    if value is None or isinstance(value, bool):
        raise ValidationError(field, "is required: an epoch, 0 or more")
    epoch = to_int(value, field)
    if epoch < 0:
        raise ValidationError(field, f"is not an epoch: {epoch}")
    return epoch


def _imported_replicas(raw: Any) -> tuple[Replica, ...]:
    if not isinstance(raw, list) or not raw:
        raise ValidationError("replicas", "must be a non-empty list of {brokerId, "
                              "brokerAddress, alive}")
    found: dict[int, Replica] = {}
    for i, r in enumerate(raw):
        if not isinstance(r, dict):
            raise ValidationError(f"replicas[{i}]", "must be an object")
        broker_id = _broker_id(r.get("brokerId"), f"replicas[{i}].brokerId")
        addr = validation.addr(r.get("brokerAddress"), f"replicas[{i}].brokerAddress")
        if broker_id == 0 or broker_id in found:
            raise ValidationError(f"replicas[{i}].brokerId", f"{broker_id} is not a new "
                                  "controller id (1, 2, ...)")
        found[broker_id] = Replica(broker_id, addr,
                                   to_bool(r.get("alive"), f"replicas[{i}].alive"))
    return tuple(found[i] for i in sorted(found))


def imported_set(name: str, body: dict[str, Any]) -> BrokerSet:
    """A broker set as GET /v1/controller/broker-sets/{name} answers it (and as nsfleet admin
    reads a Java controller's GET_SYNC_STATE_DATA), checked whole before anything is written."""
    if body.get("brokerName", name) != name:
        raise ValidationError("brokerName", f"{body.get('brokerName')!r} is not {name!r}")
    cluster = validation.name(body.get("clusterName"), "clusterName")
    replicas = _imported_replicas(body.get("replicas"))
    ids = {r.broker_id for r in replicas}
    raw_master = body.get("masterBrokerId")
    master = None if raw_master is None else _broker_id(raw_master, "masterBrokerId")
    if master is not None and master not in ids:
        raise ValidationError("masterBrokerId", f"{master} is not one of the replicas")
    raw_sss = body.get("syncStateSet")
    if not isinstance(raw_sss, list):
        raise ValidationError("syncStateSet", "must be a list of replica ids")
    sss = tuple(sorted({_broker_id(v, f"syncStateSet[{i}]") for i, v in enumerate(raw_sss)}))
    if not set(sss) <= ids:
        raise ValidationError("syncStateSet", f"{sorted(set(sss) - ids)} are not replicas")
    master_epoch = _epoch(body, "masterEpoch")
    if master is not None and master not in sss:
        raise ValidationError("masterBrokerId", f"{master} is not in the syncStateSet {list(sss)}")
    if master is not None and master_epoch == 0:
        raise ValidationError("masterEpoch", "is 0 with a master: an elected master's epoch is "
                              "1 or more")
    master_addr = next((r.address for r in replicas if r.broker_id == master), "")
    return BrokerSet(name, cluster, max(ids) + 1, master, master_addr, master_epoch, sss,
                     _epoch(body, "syncStateSetEpoch"), replicas)


async def import_set(request: web.Request) -> web.Response:
    """A broker set moved from a Java controller (docs/controller.md): written unless the fleet
    holds it already (``imported`` false) or has moved past it (409)."""
    name = request.match_info["broker_name"]
    body = parse.json_object(await request.read())
    s = imported_set(name, body)
    grace = body.get("graceSeconds", DEFAULT_IMPORT_GRACE_S)
    if isinstance(grace, bool) or not isinstance(grace, int | float) or not 1 <= grace <= 3600:
        raise ValidationError("graceSeconds", f"must be 1-3600 seconds: {grace!r}")
    controller = _controller(request)
    written = await controller.import_set(s, int(grace * 1000))
    now = await controller.sync_state_data([name])
    return web.json_response({"imported": written, "brokerSet": broker_set_json(now[0])})


async def clean(request: web.Request) -> web.Response:
    """mqadmin cleanBrokerMetadata: these ids (none: the whole set) leave the controller;
    refused (2009) while one is alive unless ``cleanLivingBroker``."""
    name = request.match_info["broker_name"]
    body = parse.json_object(await request.read())
    raw = body.get("brokerIds")
    if raw is None:  # null names none, as an absent field: the whole set
        raw = []
    if not isinstance(raw, list):
        raise ValidationError("brokerIds", "must be a list of broker ids")
    ids = [_broker_id(v, f"brokerIds[{i}]") for i, v in enumerate(raw)]
    living = to_bool(body.get("cleanLivingBroker"), "cleanLivingBroker")
    await _controller(request).clean(name, ids, living=living)
    return web.json_response({"brokerName": name, "brokerIds": [] if living else ids,
                              "cleanLivingBroker": living})


def add_routes(app: web.Application, controller: Controller) -> None:
    app[CONTROLLER_KEY] = controller
    base = "/v1/controller"
    for method, path, handler in (
            ("GET", "/metadata", metadata), ("GET", "/config", config),
            ("PUT", "/config", update_config),
            ("GET", "/broker-sets", broker_sets), ("GET", "/broker-sets/{broker_name}", broker_set),
            ("PUT", "/broker-sets/{broker_name}", import_set),
            ("POST", "/broker-sets/{broker_name}/elect", elect),
            ("POST", "/broker-sets/{broker_name}/clean", clean)):
        # add_get also answers HEAD, as the app's other GET routes do.
        add = {"GET": app.router.add_get, "POST": app.router.add_post,
               "PUT": app.router.add_put}[method]
        add(base + path, handler)
