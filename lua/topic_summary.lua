--[[
  Some topics' queue data, for the console's topic summary (GET /v1/topics/summary): a worker
  keeps the rows of every topic and reads again only the topics a change message named (a queue
  row never changes without its topic being announced). A read; the caller passes a bounded
  number of topics per call so that it stays short.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, TopicSummaryArgs):
    ARGV[1..] arg_topics    the topics (every ARGV item)
  Output:
    {"ok", {topic, {brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag,
     brokerName, ...}}, ...}: one entry per topic, in arg_topics' order (no rows: the topic is
     gone)
]]
--- @include "rcall"
--- @include "keys"
--- @include "group_ids"

local out = {'ok'}
for _, topic in ipairs(arg_topics) do
  local rows = {}
  for _, name in ipairs(group_names_of(rcall('SMEMBERS', k_topic(topic)))) do
    local q = rcall('HMGET', k_queue(topic, name), 'readQueueNums', 'writeQueueNums', 'perm',
      'topicSysFlag')
    if q[1] then
      rows[#rows + 1] = name
      rows[#rows + 1] = q[1]
      rows[#rows + 1] = q[2]
      rows[#rows + 1] = q[3]
      rows[#rows + 1] = q[4] or '0'
    end
  end
  out[#out + 1] = {topic, rows}
end
return out
