--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua, KEYS[2] (P:idx:kvns) and KEYS[3]
  (P:idx:kv:ORDER_TOPIC_CONFIG); no ARGV[i]: its functions take what they use as arguments.
  The answer to a registration (steps 13 and 14 of RouteInfoManager.registerBroker), shared by
  register_broker.lua and register_commit.lua.
]]
-- {"ok", masterAddr|"", haServerAddr|"", generation, changed, kvFlag, k1, v1, ...}
local function register_reply(cluster, name, id, generation, changed, want_kv)
  -- Step 13: a slave learns its master's address and HA address.
  local master_addr, master_ha = '', ''
  local master = rcall('HGET', k_members(name), '0')
  if id ~= '0' and master then
    local mha = rcall('HGET', k_broker(cluster, master), 'haServerAddr')
    if mha then master_addr, master_ha = master, mha end
  end
  local reply = {'ok', master_addr, master_ha, generation, changed, '0'}
  if want_kv and rcall('SISMEMBER', KEYS[2], 'ORDER_TOPIC_CONFIG') == 1 then
    reply[6] = '1'
    for _, v in ipairs(rcall('HGETALL', KEYS[3])) do reply[#reply + 1] = v end
  end
  return reply
end
