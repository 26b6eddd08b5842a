"""``nsfleet simulate``: many simulated brokers against a fleet, for demos and load. A client of
the fleet like ``nsfleet.client``: it reaches the workers over the wire only.

``plan``: the simulated deployment (groups, members, topic tables); ``brokers``: the brokers
that register, heartbeat and leave, with their progress display; ``cli``: the command line."""
