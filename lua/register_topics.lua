--[[
  One chunk of a registration too big for one call (register_broker.lua "head", then these
  chunks, then register_commit.lua): writes part of the group's queue data, or removes part of
  what deleteTopicWithBrokerRegistration drops, in one short call. Each topic is written whole
  within one chunk, so a route read between chunks sees it before or after, never half written.
  Written only while the broker's registration record still carries the head's generation: a
  later registration of the broker, or its removal, has taken over and the chunk writes nothing.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] clusterName   ARGV[2] brokerAddr   ARGV[3] brokerName
    ARGV[4] the generation the head answered
    ARGV[5] "1" = write every topic (force), "0" = only topics missing their queue row
    ARGV[6] "1" = clear the write perm (a prime slave of an acting-master group)
    ARGV[7] topics, a line each: topic, readQueueNums, writeQueueNums, perm, topicSysFlag,
            tab-separated, the numbers as decimal strings (includes/queues.lua's TABLE_ROW)
    ARGV[8] static-topic mappings, a JSON array of arrays (topic, bname, TopicQueueMappingInfo JSON)
    ARGV[9] topics whose queue data of this group goes, as a JSON array of topics
    ARGV[10] "1" = the group had no queue data when the registration began (the head's fresh):
             rows are written without reading them first
  Output:
    {"ok", changed, epochDelta, added}   changed "1" when a table changed; epochDelta: how far
                      this call advanced the group's topicsEpoch (register_commit.lua checks that
                      nothing but the chunks advanced it); added: the rows among those it added
                      (rows it only added leave the broker's recorded tables valid,
                      includes/tables.lua)
    {"stale"}         the registration was superseded; nothing written
]]
--- @include "keys"
--- @include "changes"
--- @include "cascade"
--- @include "queues"

local cluster, addr, name, generation = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if rcall('HGET', k_reg(cluster, addr), 'generation') ~= generation
    or rcall('EXISTS', k_group(name)) == 0 then
  return {'stale'}
end
local gkey = k_group(name)
local epoch = tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0')
local added = write_queues(name, ARGV[7], cjson.decode(ARGV[8]), ARGV[5] == '1',
  ARGV[6] == '1', ARGV[10] == '1')
local btkey = k_broker_topics(name)
for _, topic in ipairs(cjson.decode(ARGV[9])) do
  if rcall('SISMEMBER', btkey, topic) == 1 then drop_queue(topic, name) end
end
local delta = tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0') - epoch
return {'ok', publish_changes() and '1' or '0', tostring(delta), tostring(added)}
