--[[
  Candidate (issue 42, Java's table shape): unregister a broker, or forget one of its
  connections, with the candidate's removal cascade (includes/topic_cascade.lua); otherwise
  lua/unregister_broker.lua.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, UnregisterBrokerArgs):
    ARGV[1] arg_cluster       clusterName
    ARGV[2] arg_addr          brokerAddr
    ARGV[3] arg_name          brokerName
    ARGV[4] arg_connection    "" = unregister unconditionally; else the connection that closed
    ARGV[5] arg_row_budget    the most queue rows the cascade removes in this call; the lists
                              left over go to drain_cleanup.lua
  Output:
    {"ok", "1"|"0", cleanup}  removed; "1" when its group went with it; cleanup "1" when queue
                              data is left for drain_cleanup.lua
    {"kept"}                  (a closed connection) the broker is registered over another one
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "topic_cascade"

local cluster, addr, name, conn = arg_cluster, arg_addr, arg_name, arg_connection
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
