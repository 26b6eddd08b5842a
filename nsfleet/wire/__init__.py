"""RocketMQ's remoting wire format, shared by the server's front ends and every client: frames and
their headers (``codec``), typed request headers (``headers``), request and response bodies
(``bodies``), fastjson's encodings (``fastjson``) and request signing (``signature``). Nothing here
opens a socket or knows a NameServer: the server (``nsfleet.remoting``) and the clients
(``nsfleet.client``, ``nsfleet.admin``, the simulator) each build on it.
"""
