--[[
  The last call of a registration in chunks: records the table's digest and the group's
  topicsEpoch on the registration record and clears its "pending" mark, so the next unchanged
  re-registration is O(1) again; then answers like register_broker.lua. Only while the record
  still carries the head's generation (else a later registration owns it; the answer is built
  all the same).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kvns
    KEYS[3] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[1] clusterName   ARGV[2] brokerAddr   ARGV[3] brokerName   ARGV[4] brokerId
    ARGV[5] the generation the head answered
    ARGV[6] digest of the table as sent
    ARGV[7] "1" = return the ORDER_TOPIC_CONFIG KV table
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, "0", kvFlag, k1, v1, ...}
      (as register_broker.lua; "changed" is told by the head and the chunks)
]]
--- @include "keys"
--- @include "register_reply"

local cluster, addr, name, id, generation = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local rkey = k_reg(cluster, addr)
if rcall('HGET', rkey, 'generation') == generation then
  rcall('HSET', rkey, 'tableDigest', ARGV[6],
    'topicsEpoch', rcall('HGET', k_group(name), 'topicsEpoch') or '0')
  rcall('HDEL', rkey, 'pending')
end
return register_reply(cluster, name, id, generation, '0', ARGV[7] == '1')
