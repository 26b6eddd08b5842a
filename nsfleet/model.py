from nsfleet.domain.model import *  # noqa: F403  (temporary)
from nsfleet.domain.model import DEFAULT_HEARTBEAT_TIMEOUT_MS  # noqa: F401
