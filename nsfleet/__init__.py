"""nsfleet: a horizontally scalable RocketMQ NameServer on Redis."""

__version__ = "0.1.0"
