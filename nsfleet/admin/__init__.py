"""``nsfleet admin``: mqadmin's NameServer commands, over an nsfleet worker's HTTP API or the
RocketMQ remoting protocol (the command line is ``admin.cli``)."""
