--[[
  Candidate (issue 42, Java's table shape): the last call of a registration in chunks,
  lua/register_commit.lua plus one step of the candidate layout: the group's lists of chunks past
  the table's last (a longer table before) go, their topics whose row stays moving to the list
  "+" (includes/topic_rows.lua).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kvns
    KEYS[3] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, RegisterCommitArgs):
    ARGV[1] arg_cluster        clusterName
    ARGV[2] arg_addr           brokerAddr
    ARGV[3] arg_name           brokerName
    ARGV[4] arg_id             brokerId
    ARGV[5] arg_generation     the generation the head answered
    ARGV[6] arg_digest         digest of the table as sent
    ARGV[7] arg_want_kv        "1" = return the ORDER_TOPIC_CONFIG KV table
    ARGV[8] arg_epoch          the head's topicsEpoch plus every chunk's epochDelta
    ARGV[9] arg_synced         "1" = the chunks wrote every row as the table says
    ARGV[10] arg_added_epoch   the head's topicsEpoch plus the rows the chunks added
    ARGV[11] arg_chunks        how many chunks the table was written in, "" when this broker
                               writes no queue data (its group's lists are left alone)
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, "0", kvFlag, k1, v1, ...}
]]
--- @include "rcall"
--- @include "keys"
--- @include "register_reply"
--- @include "tables"
--- @include "topic_rows"

local cluster, addr, name, id = arg_cluster, arg_addr, arg_name, arg_id
local generation, digest, expected = arg_generation, arg_digest, arg_epoch
local rkey = k_reg(cluster, addr)
if rcall('HGET', rkey, 'generation') == generation then
  if arg_chunks ~= '' then trim_chunks(name, tonumber(arg_chunks)) end
  local epoch = rcall('HGET', k_group(name), 'topicsEpoch') or '0'
  if epoch == expected then
    rcall('HSET', rkey, 'tableDigest', digest, 'topicsEpoch', epoch, 'synced', arg_synced)
  else
    rcall('HSET', rkey, 'tableDigest', digest, 'topicsEpoch', '', 'synced', '0')
  end
  record_table(cluster, addr, digest, epoch == expected and expected == arg_added_epoch,
    epoch == expected and arg_synced == '1')
  rcall('HDEL', rkey, 'pending')
end
return register_reply(cluster, name, id, generation, '0', arg_want_kv == '1')
