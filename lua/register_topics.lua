--[[
  One chunk of a registration too big for one call (register_broker.lua "head", then these
  chunks, then register_commit.lua): writes part of the group's queue data, or removes part of
  what deleteTopicWithBrokerRegistration drops, in one short call. Each topic is written whole
  within one chunk, so a route read between chunks sees it before or after, never half written.
  Written only while the broker's registration record still carries the head's generation: a
  later registration of the broker, or its removal, has taken over and the chunk writes nothing.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterTopicsArgs):
    ARGV[1] arg_cluster        clusterName
    ARGV[2] arg_addr           brokerAddr
    ARGV[3] arg_name           brokerName
    ARGV[4] arg_generation     the generation the head answered
    ARGV[5] arg_force          "1" = write every topic, "0" = only topics missing their queue row
    ARGV[6] arg_clear_write    "1" = clear the write perm (a prime slave of an acting-master group)
    ARGV[7] arg_topics         topics, a line each: topic, readQueueNums, writeQueueNums, perm,
                               topicSysFlag, tab-separated, the numbers as decimal strings
                               (includes/<layout>/queue_data.lua's TABLE_ROW)
    ARGV[8] arg_mappings       static-topic mappings, a JSON array of arrays (topic, bname,
                               TopicQueueMappingInfo JSON)
    ARGV[9] arg_absent         topics whose queue data of this group goes, as a JSON array of topics
    ARGV[10] arg_fresh         "1" = the group had no queue data when the registration began (the
                               head's fresh): rows are written without reading them first
    ARGV[11] arg_absent_lists  the group's list fields that name arg_absent's topics, a JSON array
                               ("" = every list; includes/<layout>/queue_data.lua's qd_drop_absent:
                               only these are read and rewritten)
  Output:
    {"ok", changed, epochDelta, added}   changed "1" when a table changed; epochDelta: how far
                      this call advanced the group's topicsEpoch (register_commit.lua checks that
                      nothing but the chunks advanced it); added: the rows among those it added
                      (rows it only added leave the broker's recorded tables valid,
                      includes/tables.lua)
    {"stale"}         the registration was superseded; nothing written
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "chunk_fence"
--- @include "queue_data"

local cluster, addr, name, generation = arg_cluster, arg_addr, arg_name, arg_generation
local moved = qd_fence(true)
if moved then return moved end
if not chunk_current(cluster, addr, name, generation) then return {'stale'} end
local gkey = k_group(name)
local epoch = tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0')
local added = write_queues(name, arg_topics, cjson.decode(arg_mappings), arg_force == '1',
  arg_clear_write == '1', arg_fresh == '1')
qd_drop_absent(name, cjson.decode(arg_absent),
  arg_absent_lists ~= '' and cjson.decode(arg_absent_lists) or nil)
local delta = tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0') - epoch
return {'ok', publish_changes() and '1' or '0', tostring(delta), tostring(added)}
