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
    ARGV[1] clusterName   ARGV[2] brokerAddr   ARGV[3] brokerName   ARGV[4] brokerId
    ARGV[5] the generation the head answered
    ARGV[6] digest of the table as sent
    ARGV[7] "1" = return the ORDER_TOPIC_CONFIG KV table
    ARGV[8] the group's topicsEpoch the head answered plus every chunk's epochDelta
    ARGV[9] "1" = the chunks wrote every row as the table says (a forced write by a writer):
            recorded as "synced" (see register_broker.lua) and among the broker's tables
            (includes/tables.lua)
    ARGV[10] the group's topicsEpoch the head answered plus the rows the chunks added: equal to
            ARGV[8] when the chunks changed or removed no row, so the broker's other recorded
            tables still hold
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, "0", kvFlag, k1, v1, ...}
      (as register_broker.lua; "changed" is told by the head and the chunks)
]]
--- @include "keys"
--- @include "register_reply"
--- @include "tables"

local cluster, addr, name, id, generation = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local rkey = k_reg(cluster, addr)
if rcall('HGET', rkey, 'generation') == generation then
  local epoch = rcall('HGET', k_group(name), 'topicsEpoch') or '0'
  if epoch == ARGV[8] then
    rcall('HSET', rkey, 'tableDigest', ARGV[6], 'topicsEpoch', epoch, 'synced', ARGV[9])
  else
    rcall('HSET', rkey, 'tableDigest', ARGV[6], 'topicsEpoch', '', 'synced', '0')
  end
  -- The head dropped the recorded tables unless they held then; they still hold when the
  -- chunks only added rows.
  record_table(cluster, addr, ARGV[6], epoch == ARGV[8] and ARGV[8] == ARGV[10],
    epoch == ARGV[8] and ARGV[9] == '1')
  rcall('HDEL', rkey, 'pending')
end
return register_reply(cluster, name, id, generation, '0', ARGV[7] == '1')
