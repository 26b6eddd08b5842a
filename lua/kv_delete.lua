--[[
  DELETE_KV_CONFIG (KVConfigManager.deleteKVConfig): remove one key. The namespace stays,
  possibly empty, as in Java.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:kv:<namespace>:<key>
    KEYS[3] P:idx:kv:<namespace>
    ARGV[1] key
    ARGV[2] "1" when the namespace is ORDER_TOPIC_CONFIG
  Output:
    {"ok", removed}
      removed  "1" when a value was removed, "0" when there was none
]]
--- @include "keys"
--- @include "changes"

rcall('DEL', KEYS[2])
if rcall('HDEL', KEYS[3], ARGV[1]) == 0 then return {'ok', '0'} end
if ARGV[2] == '1' then touch_topic(ARGV[1]) else touch_none() end
publish_changes()
return {'ok', '1'}
