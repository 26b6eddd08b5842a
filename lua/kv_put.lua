--[[
  PUT_KV_CONFIG: store one value, creating the namespace if needed. Idempotent (admin tools fan
  the same put out to every name server address).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:kv:<namespace>:<key>   the row (spark-readable)
    KEYS[3] P:idx:kv:<namespace>     the namespace's key -> value hash
    KEYS[4] P:idx:kvns               the set of namespaces
    ARGV[1] namespace   ARGV[2] key   ARGV[3] value
    ARGV[4] "1" when the namespace is ORDER_TOPIC_CONFIG (the value is the route's orderTopicConf)
  Output:
    1 when the value changed, 0 when it was already stored
]]
--- @include "keys"
--- @include "changes"

local ns, key, value = ARGV[1], ARGV[2], ARGV[3]
rcall('SADD', KEYS[4], ns)
if rcall('HGET', KEYS[3], key) == value then return 0 end
rcall('HSET', KEYS[2], 'namespace', ns, 'key', key, 'value', value)
rcall('HSET', KEYS[3], key, value)
if ARGV[4] == '1' then touch_topic(key) else touch_none() end
publish_changes()
return 1
