--[[
  The last call of a registration in chunks: records the table's digest and the group's
  topicsEpoch on the registration record and clears its "pending" mark, so the next unchanged
  re-registration is O(1) again; then answers like register_broker.lua. Only while the record
  still carries the head's generation (else a later registration owns it; the answer is built
  all the same). When something besides the chunks changed the group's queue rows meanwhile
  (the epoch is not the head's plus the chunks' advances), no epoch is recorded, so the next
  registration does the full work.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kvns
    KEYS[3] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterCommitArgs):
    ARGV[1] arg_cluster        clusterName
    ARGV[2] arg_addr           brokerAddr
    ARGV[3] arg_name           brokerName
    ARGV[4] arg_id             brokerId
    ARGV[5] arg_generation     the generation the head answered
    ARGV[6] arg_digest         digest of the table as sent
    ARGV[7] arg_want_kv        "1" = return the ORDER_TOPIC_CONFIG KV table
    ARGV[8] arg_epoch          the group's topicsEpoch the head answered plus every chunk's
                               epochDelta
    ARGV[9] arg_synced         "1" = the chunks wrote every row as the table says (a forced write by
                               a writer): recorded as "synced" (see register_broker.lua) and among
                               the broker's tables (includes/tables.lua)
    ARGV[10] arg_added_epoch   the group's topicsEpoch the head answered plus the rows the chunks
                               added: equal to arg_epoch when the chunks changed or removed no row,
                               so the broker's other recorded tables still hold
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, "0", kvFlag, k1, v1, ...}
      (as register_broker.lua; "changed" is told by the head and the chunks)
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "register_reply"
--- @include "tables"
--- @include "queue_data"

local cluster, addr, name, id = arg_cluster, arg_addr, arg_name, arg_id
local generation, digest, expected = arg_generation, arg_digest, arg_epoch
local rkey = k_reg(cluster, addr)
local moved = qd_fence(true)
if moved then return moved end
if rcall('HGET', rkey, 'generation') == generation then
  local epoch = rcall('HGET', k_group(name), 'topicsEpoch') or '0'
  if epoch == expected then
    rcall('HSET', rkey, 'tableDigest', digest, 'topicsEpoch', epoch, 'synced', arg_synced)
  else
    rcall('HSET', rkey, 'tableDigest', digest, 'topicsEpoch', '', 'synced', '0')
  end
  -- The head dropped the recorded tables unless they held then; they still hold when the
  -- chunks only added rows.
  record_table(cluster, addr, digest, epoch == expected and expected == arg_added_epoch,
    epoch == expected and arg_synced == '1')
  rcall('HDEL', rkey, 'pending')
end
return register_reply(cluster, name, id, generation, '0', arg_want_kv == '1')
