--[[
  Candidate (issue 42, Java's table shape): one chunk of a registration, lua/register_topics.lua
  over the candidate layout (includes/table_keys.lua). Writes the chunk's queue data, a field of
  group `name` in each topic's hash, and the chunk's topics as one value of the group's lists;
  or removes, for deleteTopicWithBrokerRegistration, the group's rows of topics the table no
  longer holds. Only while the broker's registration record still carries the head's generation.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, RegisterTopicsArgs):
    ARGV[1] arg_cluster        clusterName
    ARGV[2] arg_addr           brokerAddr
    ARGV[3] arg_name           brokerName
    ARGV[4] arg_generation     the generation the head answered
    ARGV[5] arg_force          "1" = write every topic, "0" = only topics missing the group's field
    ARGV[6] arg_clear_write    "1" = clear the write perm (a prime slave of an acting-master group)
    ARGV[7] arg_chunk          this chunk's number in the table ("1", "2", ...), "" for a call
                               that only removes
    ARGV[8] arg_topics         topics, a line each: topic, readQueueNums, writeQueueNums, perm,
                               topicSysFlag, tab-separated (today's table_arg); the four numbers
                               are stored as they come, as the field's value
    ARGV[9] arg_mappings       static-topic mappings, a JSON array of arrays (topic, bname, JSON)
    ARGV[10] arg_absent        topics whose row of this group goes, a line each
    ARGV[11] arg_fresh         "1" = the group had no queue data when the registration began
  Output:
    {"ok", changed, epochDelta, added}   as lua/register_topics.lua
    {"stale"}         the registration was superseded; nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "topic_rows"

local cluster, addr, name, generation = arg_cluster, arg_addr, arg_name, arg_generation
if rcall('HGET', k_reg(cluster, addr), 'generation') ~= generation
    or rcall('EXISTS', k_group(name)) == 0 then
  return {'stale'}
end
local added, delta = write_rows(name, arg_chunk, arg_topics, cjson.decode(arg_mappings),
  arg_force == '1', arg_clear_write == '1', arg_fresh == '1')
if arg_absent ~= '' then delta = delta + drop_absent(name, arg_absent) end
return {'ok', publish_changes() and '1' or '0', tostring(delta), tostring(added)}
