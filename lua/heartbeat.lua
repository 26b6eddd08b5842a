--[[
  Refresh a live broker's deadline (BROKER_HEARTBEAT, and QUERY_DATA_VERSION which also compares
  the DataVersion). O(1) whatever the broker's topic count. An unknown or already-expired broker is
  left alone: it must register again.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] clusterName   ARGV[2] brokerAddr
    ARGV[3] "1" = also compare a DataVersion: ARGV[4] counter, ARGV[5] timestamp, ARGV[6] stateVersion
  Output:
    {"ok", changed, counter, timestamp, stateVersion}   the broker is live and was refreshed
    {"unknown", changed, "", "", ""}                    the broker is not live; nothing written
      changed  "1" when the stored DataVersion is missing or differs from ARGV[4..6], else "0"
               (always "0" without ARGV[3])
      counter, timestamp, stateVersion: the stored DataVersion
]]
--- @include "keys"

local cluster, addr = ARGV[1], ARGV[2]
local bkey = k_broker(cluster, addr)
local row = rcall('HMGET', bkey, 'heartbeatTimeoutMillis', 'dataVersionCounter',
  'dataVersionTimestamp', 'stateVersion')
if not row[1] then
  return {'unknown', ARGV[3] == '1' and '1' or '0', '', '', ''}
end
local now = now_ms()
local deadline = now + tonumber(row[1])
rcall('HSET', bkey, 'lastUpdateTimestamp', fmt(now))
rcall('PEXPIREAT', bkey, fmt(deadline))
rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
local changed = '0'
if ARGV[3] == '1' and (row[2] ~= ARGV[4] or row[3] ~= ARGV[5] or row[4] ~= ARGV[6]) then
  changed = '1'
end
return {'ok', changed, row[2], row[3], row[4]}
