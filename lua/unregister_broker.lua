--[[
  Unregister a broker (UNREGISTER_BROKER, RouteInfoManager.unRegisterBroker), or forget one of
  its connections (BrokerHousekeepingService.onChannelClose), with the full cascade of
  includes/cascade.lua. Applied synchronously, so there is no batch queue to race with a fresh
  registration (apache/rocketmq#11043). The live row of (cluster, addr) is removed only while that
  address's registration record names arg_name (or is gone): an address since registered in
  another group keeps that registration alive.
  A broker keeps a connection to every worker, so a closed connection removes it only when no
  other connection it registered over is still open: one of a live worker (a dead worker's
  presence key has expired, so its connections count as closed).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, UnregisterBrokerArgs):
    ARGV[1] arg_cluster       clusterName
    ARGV[2] arg_addr          brokerAddr
    ARGV[3] arg_name          brokerName
    ARGV[4] arg_connection    "" = unregister unconditionally; else the connection "<worker>:<n>"
                              that closed
    ARGV[5] arg_row_budget    the most queue rows the cascade removes in this call; past it the
                              group's topics are left to drain_cleanup.lua (includes/cascade.lua)
  Output:
    {"ok", "1"|"0", cleanup}  removed; "1" when its group went with it; cleanup "1" when queue
                              data is left for drain_cleanup.lua
    {"kept"}         (a closed connection) the broker is registered over another open
                     connection, or was never registered over this one; nothing else changed
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "cascade"
--- @include "queue_data"

local cluster, addr, name, conn = arg_cluster, arg_addr, arg_name, arg_connection
local moved = qd_fence(true)
if moved then return moved end
local budget = new_budget(tonumber(arg_row_budget))
if conn ~= '' then
  local ckey = k_conns(cluster, addr)
  if rcall('SREM', ckey, conn) == 0 then return {'kept'} end
  for _, c in ipairs(rcall('SMEMBERS', ckey)) do
    if rcall('EXISTS', k_worker(string.match(c, '^(.*):[^:]*$') or c)) == 1 then
      return {'kept'}
    end
  end
end
local removed = remove_broker(budget, cluster, addr, name)
publish_changes()
return {'ok', tostring(removed), budget.deferred and '1' or '0'}
