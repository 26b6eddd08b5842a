--[[
  Unregister a broker (UNREGISTER_BROKER, or a closed broker connection;
  RouteInfoManager.unRegisterBroker) with the full cascade of includes/cascade.lua. Applied
  synchronously, so there is no batch queue to race with a fresh registration
  (apache/rocketmq#11043); a connection-close unregister is also fenced by the registration
  generation it saw. The live row of (cluster, addr) is removed only while that
  address's registration record names ARGV[3] (or is gone): an address since registered in
  another group keeps that registration alive.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] clusterName   ARGV[2] brokerAddr   ARGV[3] brokerName
    ARGV[4] generation fence: "" = unconditional; otherwise remove only while the broker's
            registration record still carries this generation
  Output:
    {"ok", removed}
      removed  "1" when the broker was removed and its group went with it, "0" when it was
               removed from a group that remains (or an unknown group)
    {"fenced"}  ARGV[4] is set and the registration record carries another generation (a newer
                registration exists, or none at all): nothing is written
]]
--- @include "keys"
--- @include "changes"
--- @include "cascade"

local cluster, addr, name, fence = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if fence ~= '' and rcall('HGET', k_reg(cluster, addr), 'generation') ~= fence then
  return {'fenced'}
end
local removed = remove_broker(cluster, addr, name)
publish_changes()
return {'ok', tostring(removed)}
