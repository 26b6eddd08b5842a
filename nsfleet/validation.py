from nsfleet.domain.validation import *  # noqa: F403  (temporary)
from nsfleet.domain.validation import TOPIC_RE, NAME_MAX_LEN, TOPIC_MAX_LEN  # noqa: F401
