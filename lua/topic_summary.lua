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
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "queue_data"

local moved = qd_fence(false)
if moved then return moved end
local out = {'ok'}
for _, topic in ipairs(arg_topics) do
  local rows = {}
  local names, values = qd_topic_rows(topic)
  for n, name in ipairs(names) do
    local q = values[n]
    rows[#rows + 1] = name
    rows[#rows + 1] = q[1]
    rows[#rows + 1] = q[2]
    rows[#rows + 1] = q[3]
    rows[#rows + 1] = q[4]
  end
  out[#out + 1] = {topic, rows}
end
return out
