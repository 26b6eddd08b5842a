--[[
  Some topics' queue data with their change counters, for the console's topic summary (GET
  /v1/topics/summary): a worker keeps the rows of every topic by the topic's rev and reads again
  only the topics whose rev moved (a queue row never changes without its topic's rev). A read;
  the caller passes a bounded number of topics per call so that it stays short.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1..n] topics
  Output:
    {"ok", {topic, rev, {brokerName, readQueueNums, writeQueueNums, perm, topicSysFlag,
     brokerName, ...}}, ...}: one entry per topic, in ARGV's order; rev "0" for a topic never
     changed (or gone), whose rows are then none
]]
--- @include "keys"

local out = {'ok'}
for _, topic in ipairs(ARGV) do
  local rows = {}
  for _, name in ipairs(rcall('SMEMBERS', k_topic(topic))) do
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
  out[#out + 1] = {topic, rcall('GET', k_topic_rev(topic)) or '0', rows}
end
return out
