--[[
  Register a topic's queue data directly (REGISTER_TOPIC_IN_NAMESRV, RouteInfoManager.registerTopic).
  Only broker groups the name server knows count: for a new topic every group must be known or the
  whole request is ignored; for an existing topic rows are written in order and writing stops at the
  first unknown group (earlier rows stick, as in Java).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] topic
    then groups of 5: brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag
  Output:
    {"ok", written}
      written  number of queue data rows written
]]
--- @include "keys"
--- @include "changes"
--- @include "group_ids"

local topic = ARGV[1]
local n = (#ARGV - 1) / 5
if n == 0 then return {'ok', 0} end
local exists = rcall('SISMEMBER', k_topics(), topic) == 1
if not exists then
  for i = 0, n - 1 do
    if rcall('EXISTS', k_group(ARGV[2 + i * 5])) == 0 then return {'ok', 0} end
  end
end
local written = 0
for i = 0, n - 1 do
  local at = 2 + i * 5
  local name = ARGV[at]
  if rcall('EXISTS', k_group(name)) == 0 then break end
  rcall('HSET', k_queue(topic, name), 'topic', topic, 'brokerName', name,
    'readQueueNums', ARGV[at + 1], 'writeQueueNums', ARGV[at + 2], 'perm', ARGV[at + 3],
    'topicSysFlag', ARGV[at + 4])
  rcall('SADD', k_topic(topic), group_id(name))
  rcall('SADD', k_broker_topics(name), topic)
  rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)  -- the next registration does full work
  rcall('SADD', k_topics(), topic)
  written = written + 1
end
if written > 0 then touch_topic(topic) end
publish_changes()
return {'ok', written}
