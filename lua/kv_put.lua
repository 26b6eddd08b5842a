--[[
  PUT_KV_CONFIG (KVConfigManager.putKVConfig): store one value, creating the namespace if
  needed. Idempotent (admin tools fan the same put out to every name server address).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:kv:<namespace>:<key>   the row (spark-readable)
    KEYS[3] P:idx:kv:<namespace>     the namespace's key -> value hash
    KEYS[4] P:idx:kvns               the set of namespaces
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, KvPutArgs):
    ARGV[1] arg_namespace      namespace
    ARGV[2] arg_key            key
    ARGV[3] arg_value          value
    ARGV[4] arg_order_topic    "1" when the namespace is ORDER_TOPIC_CONFIG (the value is the
                               route's orderTopicConf)
  Output:
    {"ok", changed}
      changed  "1" when something changed, "0" when it was already so
]]
--- @include "rcall"
--- @include "changes"

local ns, key, value = arg_namespace, arg_key, arg_value
local changed = rcall('SADD', KEYS[4], ns) == 1
if rcall('HGET', KEYS[3], key) ~= value then
  rcall('HSET', KEYS[2], 'namespace', ns, 'key', key, 'value', value)
  rcall('HSET', KEYS[3], key, value)
  changed = true
end
if not changed then return {'ok', '0'} end
if arg_order_topic == '1' then touch_topic(key) else touch_none() end
publish_changes()
return {'ok', '1'}
