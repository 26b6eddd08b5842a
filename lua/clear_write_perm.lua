--[[
  Clear the write perm on part of the queue data of an acting-master group that lost its master
  and was too big to clear in the cascade's call (includes/cascade.lua recorded it in
  P:idx:perm-clears with an SSCAN cursor). Stops, and forgets the record, once the group has a
  master again or no longer asks for an acting master: the master's registration has then
  rewritten every topic (its live row was gone, so its DataVersion counts as changed).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, ClearWritePermArgs):
    ARGV[1] arg_name     brokerName
    ARGV[2] arg_count    how many topics to visit in this call (SSCAN COUNT)
  Output:
    {"ok", cleared, more}   cleared: queue rows that lost the write perm; more "1" while topics
                            are left to visit (the record is kept), else "0" (it is gone)
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "cascade"
--- @include "queue_data"

local name = arg_name
local moved = qd_fence(true)
if moved then return moved end
local cursor = rcall('HGET', k_perm_clears(), name)
if not cursor then return {'ok', 0, '0'} end
local g = rcall('HGET', k_group(name), 'enableActingMaster')
if g ~= 'true' or rcall('HEXISTS', k_members(name), '0') == 1 then
  rcall('HDEL', k_perm_clears(), name)
  return {'ok', 0, '0'}
end
local next_cursor, topics = qd_group_page(name, cursor, tonumber(arg_count))
-- A page may name a topic twice, but its perm is cleared (and counted) only once.
local cleared = 0
for _, topic in ipairs(topics) do
  if clear_topic_write_perm(topic, name) then cleared = cleared + 1 end
end
local more = next_cursor ~= '0'
if more then
  rcall('HSET', k_perm_clears(), name, next_cursor)
else
  rcall('HDEL', k_perm_clears(), name)
end
publish_changes()
return {'ok', cleared, more and '1' or '0'}
