--[[
  Unregister a broker (UNREGISTER_BROKER, or a closed broker connection) with the full cascade of
  includes/cascade.lua. Applied synchronously, so there is no batch queue to race with a fresh
  registration (apache/rocketmq#11043); a connection-close unregister is also fenced by the
  registration generation it saw. The live row of (cluster, addr) is removed only while that
  address's registration record names ARGV[3] (or is gone): an address since registered in
  another group keeps that registration alive.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] clusterName   ARGV[2] brokerAddr   ARGV[3] brokerName
    ARGV[4] generation fence: "" = unconditional; otherwise remove only while the broker's
            registration record still carries this generation
  Output:
    -1 fenced (a newer registration exists, or none at all), 0 removed from a group that remains
    (or an unknown group), 1 removed and the group went with it
]]
--- @include "keys"
--- @include "changes"
--- @include "cascade"

local cluster, addr, name, fence = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if fence ~= '' and rcall('HGET', k_reg(cluster, addr), 'generation') ~= fence then
  return -1
end
local removed = remove_broker(cluster, addr, name)
publish_changes()
return removed
