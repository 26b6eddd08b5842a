--[[
  DELETE_KV_CONFIG (KVConfigManager.deleteKVConfig): remove one key. The namespace stays,
  possibly empty, as in Java.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:kv:<namespace>:<key>
    KEYS[3] P:idx:kv:<namespace>
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, KvDeleteArgs):
    ARGV[1] arg_key            key
    ARGV[2] arg_order_topic    "1" when the namespace is ORDER_TOPIC_CONFIG
  Output:
    {"ok", removed}
      removed  "1" when a value was removed, "0" when there was none
]]
--- @include "rcall"
--- @include "changes"

rcall('DEL', KEYS[2])
if rcall('HDEL', KEYS[3], arg_key) == 0 then return {'ok', '0'} end
if arg_order_topic == '1' then touch_topic(arg_key) else touch_none() end
publish_changes()
return {'ok', '1'}
