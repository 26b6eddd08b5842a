--[[
  Register a topic's queue data directly (REGISTER_TOPIC_IN_NAMESRV,
  RouteInfoManager.registerTopic). Only broker groups the name server knows count: for a new topic
  every group must be known or the whole request is ignored; for an existing topic rows are
  written in order and writing stops at the first unknown group (earlier rows stick, as in Java).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterTopicArgs):
    ARGV[1] arg_topic     topic
    ARGV[2..] arg_groups    the rest of ARGV, 5 items per group: brokerName, readQueueNums,
                            writeQueueNums, perm, topicSysFlag
  Output:
    {"ok", written}
      written  number of queue data rows written
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "queue_data"

local topic, groups = arg_topic, arg_groups
local moved = qd_fence(true)
if moved then return moved end
local n = #groups / 5
if n == 0 then return {'ok', 0} end
local exists = rcall('SISMEMBER', k_topics(), topic) == 1
if not exists then
  for i = 0, n - 1 do
    if rcall('EXISTS', k_group(groups[1 + i * 5])) == 0 then return {'ok', 0} end
  end
end
local written = 0
for i = 0, n - 1 do
  local at = 1 + i * 5
  local name = groups[at]
  if rcall('EXISTS', k_group(name)) == 0 then break end
  -- Counted in the group's topicsEpoch: its next registration does the full work.
  qd_put_row(topic, name, groups[at + 1], groups[at + 2], groups[at + 3], groups[at + 4])
  written = written + 1
end
publish_changes()
return {'ok', written}
