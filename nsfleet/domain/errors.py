"""The one error model: every refusal the NameServer makes, with its RocketMQ answer.

Each class carries the RocketMQ response code and the remark the Java NameServer answers with, plus
the HTTP status the JSON API uses. Front ends map these generically: the remoting server answers
``code`` + ``remark``; the HTTP app answers ``{"code", "error"}`` with ``http_status``, where
``code`` is the RocketMQ code when the error has a RocketMQ meaning (``http_reports_code``) and the
HTTP status otherwise (malformed input, an unreachable Redis).
"""

from __future__ import annotations

from enum import IntEnum

FAQ = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


class ResponseCode(IntEnum):
    """The response codes the NameServer answers with (org.apache.rocketmq.remoting.protocol
    .ResponseCode)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    QUERY_NOT_FOUND = 22
    # The controller's (RocketMQ 5 controller mode, docs/controller.md).
    CONTROLLER_FENCED_MASTER_EPOCH = 2000
    CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH = 2001
    CONTROLLER_INVALID_MASTER = 2002
    CONTROLLER_INVALID_REPLICAS = 2003
    CONTROLLER_MASTER_NOT_AVAILABLE = 2004
    CONTROLLER_INVALID_REQUEST = 2005
    CONTROLLER_BROKER_NOT_ALIVE = 2006
    CONTROLLER_NOT_LEADER = 2007
    CONTROLLER_BROKER_METADATA_NOT_EXIST = 2008
    CONTROLLER_INVALID_CLEAN_BROKER_METADATA = 2009
    CONTROLLER_BROKER_NEED_TO_BE_REGISTERED = 2010
    CONTROLLER_MASTER_STILL_EXIST = 2011
    CONTROLLER_ELECT_MASTER_FAILED = 2012
    CONTROLLER_ALTER_SYNC_STATE_SET_FAILED = 2013
    CONTROLLER_BROKER_ID_INVALID = 2014


def java_str(value: object) -> str:
    """String concatenation in Java: a null prints as "null"."""
    return "null" if value is None else str(value)


class NameServerError(Exception):
    """A request the NameServer refuses."""

    code: ResponseCode = ResponseCode.SYSTEM_ERROR
    http_status: int = 500
    http_reports_code = True

    def __init__(self, remark: str, detail: str | None = None) -> None:
        super().__init__(remark)
        self.remark = remark
        self.detail = detail  # more words for a human (HTTP), never sent over remoting

    @property
    def message(self) -> str:
        """The HTTP API's error text."""
        return f"{self.remark}: {self.detail}" if self.detail else self.remark

    @property
    def body_code(self) -> int:
        """The ``code`` field of the HTTP API's error body."""
        return int(self.code) if self.http_reports_code else self.http_status


class BadRequest(NameServerError):
    """The request itself is malformed. The Java NameServer lets such a request's exception
    escape the processor, so the remoting answer never carries a response header."""

    http_status = 400
    http_reports_code = False


class ValidationError(BadRequest, ValueError):
    """A request field is missing or invalid; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class BodyDecodeError(BadRequest, ValueError):
    """A request body that the Java NameServer could not decode either."""

    def __init__(self, message: str) -> None:
        super().__init__(f"BodyDecodeError: {message}")

    def __str__(self) -> str:
        return self.remark.removeprefix("BodyDecodeError: ")


class Crc32Mismatch(NameServerError):
    """REGISTER_BROKER's body does not match its bodyCrc32 header."""

    http_status = 400

    def __init__(self) -> None:
        super().__init__("crc32 not match")


class RegistrationRejected(NameServerError):
    """The single-topic guard refused a registration (RouteInfoManager.registerBroker)."""

    http_status = 409

    def __init__(self) -> None:
        super().__init__("register broker failed",
                         "a single-topic registration from a broker id this group has not "
                         "registered; send the broker's whole topicConfigTable (two topics or "
                         "more) first: like Java, nsfleet takes one topic alone only as an "
                         "update from a broker it already knows")


class TopicRouteNotFound(NameServerError):
    """No route for the topic (DefaultRequestProcessor / ClientRequestProcessor.getRouteInfo)."""

    code = ResponseCode.TOPIC_NOT_EXIST
    http_status = 404

    def __init__(self, topic: str | None) -> None:
        super().__init__(f"No topic route info in name server for the topic: {java_str(topic)}"
                         f"{FAQ}")
        self.topic = topic

    @property
    def message(self) -> str:
        return self.remark.removesuffix(FAQ)


class KvNotFound(NameServerError):
    """GET_KV_CONFIG / GET_KVLIST_BY_NAMESPACE found nothing."""

    code = ResponseCode.QUERY_NOT_FOUND
    http_status = 404

    def __init__(self, namespace: str | None, key: str | None = None, *,
                 whole_namespace: bool = False) -> None:
        remark = f"No config item, Namespace: {java_str(namespace)}"
        if not whole_namespace:
            remark += f" Key: {java_str(key)}"
        super().__init__(remark)


class FeatureDisabled(NameServerError):
    """A topic list was asked for while enableAllTopicList / enableTopicList is false."""

    http_status = 403

    def __init__(self) -> None:
        super().__init__("disable", "the topic list is turned off by the name server config")


class NotReady(NameServerError):
    """needWaitForService: routes are refused for waitSecondsForService after start."""

    http_status = 503

    def __init__(self) -> None:
        super().__init__("name server not ready")


class UnknownBrokerGroup(NameServerError):
    """The HTTP API's write-perm changes name a broker group no registration created. Java's
    answer (SUCCESS, count 0) stays the remoting answer; a person typing gets told."""

    http_status = 404
    http_reports_code = False

    def __init__(self, name: str | None) -> None:
        super().__init__(f"no broker group {java_str(name)} is registered",
                         "nothing changed (check the name: nsfleet admin cluster-list)")


class UnknownConfigKeys(NameServerError):
    """The HTTP API's config update names keys NamesrvConfig does not have. Java ignores them
    silently (UPDATE_NAMESRV_CONFIG, still so over remoting); a person typing gets told, and
    nothing of the request is applied."""

    http_status = 400
    http_reports_code = False

    def __init__(self, unknown: list[str], per_worker: dict[str, str]) -> None:
        """``per_worker``: keys that are each worker's own, with the flag that sets them."""
        detail = []
        if unknown:
            detail.append(f"unknown keys: {', '.join(unknown)}")
        if per_worker:
            detail.append("each worker's own, set by its flags: " + ", ".join(
                f"{key} ({flag})" for key, flag in per_worker.items()))
        super().__init__("not a fleet-wide NameServer config key",
                         "; ".join(detail) + "; nothing applied")


class ConfigBlacklisted(NameServerError):
    """UPDATE_NAMESRV_CONFIG named a key that may never be changed remotely."""

    code = ResponseCode.NO_PERMISSION
    http_status = 403

    def __init__(self, keys: str) -> None:
        super().__init__("Can not update config in black list.", keys)

    @property
    def message(self) -> str:
        return f"{self.remark} Refused: {self.detail}"


class ConfigUnparsable(NameServerError):
    """UPDATE_NAMESRV_CONFIG's body is not Java Properties text."""

    http_status = 400

    def __init__(self) -> None:
        super().__init__("string2Properties error")


class StoreUnavailable(NameServerError):
    """Redis cannot be reached (or timed out); the request may be retried."""

    http_status = 503
    http_reports_code = False

    def __init__(self, reason: str) -> None:
        super().__init__(f"Redis unavailable: {reason}")


class LayoutMoving(StoreUnavailable):
    """The route tables' layout has been moving (docs/table-shape.md) for longer than a write
    waits for it; the request may be retried."""

    def __init__(self, waited_s: float) -> None:
        NameServerError.__init__(
            self, f"the route tables' layout has been moving for {waited_s:.0f} s; writes wait "
            "for the move to end")


class ReplicaAcksMissing(NameServerError):
    """A write reached the Redis master but fewer replicas than ``--min-replica-acks``
    acknowledged it in time: not acknowledged to the client, since a failover may lose it."""

    http_status = 503
    http_reports_code = False

    def __init__(self, acks: int, wanted: int, timeout_ms: int) -> None:
        super().__init__(f"Redis replication: written to the master but acknowledged by {acks} "
                         f"of {wanted} replicas within {timeout_ms} ms, so it may not survive a "
                         "failover; retry")


class StoreFailed(NameServerError):
    """Redis answered with an error."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"Redis error: {reason}")


class KvKeyMissing(NameServerError):
    """PUT_KV_CONFIG without a namespace or key (DefaultRequestProcessor.putKVConfig)."""

    http_status = 400

    def __init__(self) -> None:
        super().__init__("namespace or key is null")


class AccessDenied(NameServerError):
    """Access control refused the request (docs/security.md): answered NO_PERMISSION with a
    remark naming the reason, never a secret or an expected signature. Over HTTP, 401 when no
    valid credential came with it, 403 when the credential lacks the scope."""

    code = ResponseCode.NO_PERMISSION
    http_status = 403

    def __init__(self, remark: str, *, unauthenticated: bool = False) -> None:
        super().__init__(remark)
        if unauthenticated:
            self.http_status = 401


class ControllerRefused(NameServerError):
    """A controller request refused with one of Java's controller codes (2000-2014) and its
    remark (ReplicasInfoManager, ControllerRequestProcessor)."""

    http_status = 409

    def __init__(self, code: ResponseCode, remark: str, detail: str | None = None) -> None:
        super().__init__(remark, detail)
        self.code = code


class ImportRefused(NameServerError):
    """A broker set moved from a Java controller that the fleet has moved past (a newer
    masterEpoch, or another master at the same one): nothing written."""

    http_status = 409
    http_reports_code = False


class UnknownBrokerSet(ControllerRefused):
    """The HTTP API asked for one broker set the controller does not know: Java's 2008, as a
    404 (over remoting GET_SYNC_STATE_DATA leaves an unknown name out)."""

    http_status = 404

    def __init__(self, name: str) -> None:
        super().__init__(ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST,
                         "Broker metadata is not existed",
                         f"the controller knows no broker set {name} (nsfleet admin "
                         "sync-state-set lists them)")
