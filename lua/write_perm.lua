--[[
  WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER over one broker group's queue data
  (RouteInfoManager.wipeWritePermOfBrokerByLock / addWritePermOfBrokerByLock).
  Wipe clears PERM_WRITE; add sets the perm to READ|WRITE (6), replacing it, as Java does.
  One page of the group's topics per call (includes/<layout>/queue_data.lua's qd_group_page), so
  a big group takes several short calls;
  each topic's row is changed whole. Java's operation is one locked step: a worker dying between
  two calls leaves the rest unchanged, and the admin's command is repeated.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, WritePermArgs):
    ARGV[1] arg_name      brokerName
    ARGV[2] arg_op        "wipe" | "add"
    ARGV[3] arg_cursor    "0" for the first call, then the cursor the previous call answered
    ARGV[4] arg_count     how many topics to visit in this call
  Output:
    {"ok", count, cursor}
    {"layout", layout}   the store is in another layout (includes/<layout>/queue_data.lua)
      count  (the first call's) number of topics that have queue data for the group, whether
             or not the perm changes (Java's count); 0 in the calls after it
      cursor "0" when every topic has been visited, else the cursor of the next call
]]
--- @include "clock"
--- @include "perms"
--- @include "changes"
--- @include "queue_data"

local name, op = arg_name, arg_op
local moved = qd_fence(true)
if moved then return moved end
-- Java's count: the topics the group has queue data of, when the operation begins.
local count = arg_cursor == '0' and qd_group_row_count(name) or 0
local next_cursor, topics = qd_group_page(name, arg_cursor, tonumber(arg_count))
for _, topic in ipairs(topics) do
  local _, _, p = qd_row(topic, name)
  local perm = tonumber(p)
  if perm then
    local new = perm
    if op == 'wipe' then
      if writeable(perm) then new = perm - 2 end
    else
      new = 6
    end
    -- A changed row counts in the group's topicsEpoch: its next registration writes its rows
    -- again (Java's does when its DataVersion changed).
    if new ~= perm then qd_set_perm(topic, name, fmt(new)) end
  end
end
publish_changes()
return {'ok', count, next_cursor}
