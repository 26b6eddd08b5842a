--[[
  Candidate (issue 42, Java's table shape): remove part of the queue data of a removed group
  whose lists were too many for its cascade's call (includes/topic_cascade.lua renamed them to
  P:idx:cleanup-topics:<name> and added the name to P:idx:cleanups): whole lists while they fit
  the limit, and part of a list longer than the limit (the rest written back). Safe from any
  number of workers at once: each call takes what it removes out of the record.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, DrainCleanupArgs):
    ARGV[1] arg_name     brokerName
    ARGV[2] arg_limit    the most queue rows to remove in this call
  Output:
    {"ok", removed, left}   left: lists still to take (0: the cleanup record is gone)
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "topic_rows"

local name, limit = arg_name, tonumber(arg_limit)
local ckey = k_cleanup_topics(name)
local taken, removed = 0, 0
for _, f in ipairs(rcall('HKEYS', ckey)) do
  if taken >= limit then break end
  local text = rcall('HGET', ckey, f)
  local rest = {}
  for t in string.gmatch(text, LISTED) do
    if taken < limit then
      taken = taken + 1
      if drop_row(t, name) then removed = removed + 1 end
    else
      rest[#rest + 1] = t
    end
  end
  if #rest == 0 then
    rcall('HDEL', ckey, f)
  else
    rcall('HSET', ckey, f, table.concat(rest, '\n'))
  end
end
local left = rcall('HLEN', ckey)
if left == 0 then rcall('SREM', k_cleanups(), name) end
publish_changes()
return {'ok', removed, left}
