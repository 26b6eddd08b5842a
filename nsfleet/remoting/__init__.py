"""The RocketMQ remoting server: the TCP front end (frames in, one NameServer call, frames out),
its request handlers, TLS and zone filtering. The wire format itself is ``nsfleet.wire``."""
