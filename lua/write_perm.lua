--[[
  WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER over one broker group's queue data
  (RouteInfoManager.wipeWritePermOfBrokerByLock / addWritePermOfBrokerByLock).
  Wipe clears PERM_WRITE; add sets the perm to READ|WRITE (6), replacing it, as Java does.
  One page of the group's topics per call (SSCAN), so a big group takes several short calls;
  each topic's row is changed whole. Java's operation is one locked step: a worker dying between
  two calls leaves the rest unchanged, and the admin's command is repeated.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, WritePermArgs):
    ARGV[1] arg_name      brokerName
    ARGV[2] arg_op        "wipe" | "add"
    ARGV[3] arg_cursor    SSCAN cursor: "0" for the first call, then the cursor the previous call
                          answered
    ARGV[4] arg_count     how many topics to visit in this call (SSCAN COUNT)
  Output:
    {"ok", count, cursor}
      count  number of topics that have queue data for the group, whether or not the perm
             changes (Java's count; a queue row exists exactly for the group's listed topics)
      cursor "0" when every topic has been visited, else the cursor of the next call
]]
--- @include "rcall"
--- @include "keys"
--- @include "perms"
--- @include "changes"

local name, op = arg_name, arg_op
local page = rcall('SSCAN', k_broker_topics(name), arg_cursor, 'COUNT', tonumber(arg_count))
for _, topic in ipairs(page[2]) do
  local qk = k_queue(topic, name)
  local perm = tonumber(rcall('HGET', qk, 'perm'))
  if perm then
    local new = perm
    if op == 'wipe' then
      if writeable(perm) then new = perm - 2 end
    else
      new = 6
    end
    if new ~= perm then
      rcall('HSET', qk, 'perm', new)
      -- A changed row: the group's next registration writes its rows again (Java's does when
      -- its DataVersion changed).
      rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
      touch_topic(topic)
    end
  end
end
publish_changes()
return {'ok', rcall('SCARD', k_broker_topics(name)), page[1]}
