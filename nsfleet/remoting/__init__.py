"""RocketMQ remoting wire codec: framing, headers, fastjson-style JSON and request bodies."""
