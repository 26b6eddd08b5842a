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
    {"ok", removed, left}   left: 0 once the cleanup record is gone, else positive (how much is
                            left, as includes/<layout>/queue_data.lua's qd_drain counts it)
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "queue_data"

local name = arg_name
local moved = qd_fence(true)
if moved then return moved end
local removed, left = qd_drain(name, tonumber(arg_limit))
if left == 0 then rcall('SREM', k_cleanups(), name) end
publish_changes()
return {'ok', removed, left}
