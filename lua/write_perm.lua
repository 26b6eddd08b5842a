--[[
  WIPE_WRITE_PERM_OF_BROKER / ADD_WRITE_PERM_OF_BROKER over one broker group's queue data
  (RouteInfoManager.wipeWritePermOfBrokerByLock / addWritePermOfBrokerByLock).
  Wipe clears PERM_WRITE; add sets the perm to READ|WRITE (6), replacing it, as Java does.
  O(topics of the group).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] brokerName
    ARGV[2] "wipe" | "add"
  Output:
    {"ok", count}
      count  number of topics that had queue data for the group, whether or not the perm changed
             (Java's count)
]]
--- @include "keys"
--- @include "changes"

local name, op = ARGV[1], ARGV[2]
local count = 0
for _, topic in ipairs(rcall('SMEMBERS', k_broker_topics(name))) do
  local qk = k_queue(topic, name)
  local perm = tonumber(rcall('HGET', qk, 'perm'))
  if perm then
    count = count + 1
    local new = perm
    if op == 'wipe' then
      if writeable(perm) then new = perm - 2 end
    else
      new = 6
    end
    if new ~= perm then
      rcall('HSET', qk, 'perm', new)
      touch_topic(topic)
    end
  end
end
publish_changes()
return {'ok', count}
