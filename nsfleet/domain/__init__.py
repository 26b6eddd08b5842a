"""What RocketMQ's NameServer is about, shared by every layer: the route objects, the input rules,
Java's literal rules and the one error model. Imports nothing else of nsfleet."""
