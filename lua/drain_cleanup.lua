--[[
  Remove part of the queue data of a broker group already removed whose topics were too many
  for one call (includes/cascade.lua put them in P:idx:cleanup:<name> and the name in
  P:idx:cleanups). Safe from any number of workers at once: each topic is popped once.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, DrainCleanupArgs):
    ARGV[1] arg_name     brokerName
    ARGV[2] arg_limit    the most queue rows to remove in this call
  Output:
    {"ok", removed, left}   left: topics still to remove (0: the cleanup record is gone)
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "cascade"

local name = arg_name
local ckey = k_cleanup(name)
local topics = rcall('SPOP', ckey, tonumber(arg_limit))
for _, topic in ipairs(topics) do drop_queue(topic, name) end
local left = rcall('SCARD', ckey)
if left == 0 then rcall('SREM', k_cleanups(), name) end
publish_changes()
return {'ok', #topics, left}
