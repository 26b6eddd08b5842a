--[[
  Refresh a broker's deadline (BROKER_HEARTBEAT, RouteInfoManager.updateBrokerInfoUpdateTimestamp,
  and QUERY_DATA_VERSION, which also compares the DataVersion). O(1) whatever the broker's topic
  count. A broker past its deadline but not yet swept is still in Java's brokerLiveTable, so it is
  kept too: its row comes back from the registration record (and its routes change back, so the
  group's topics are announced). An unknown broker is left alone: it must register again.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, HeartbeatArgs):
    ARGV[1] arg_cluster          clusterName
    ARGV[2] arg_addr             brokerAddr
    ARGV[3] arg_compare          "1" = also compare a DataVersion: the three below
    ARGV[4] arg_dv_counter       its counter
    ARGV[5] arg_dv_timestamp     its timestamp
    ARGV[6] arg_state_version    its stateVersion
  Output:
    {"ok", changed, counter, timestamp, stateVersion}   the broker is live (or past its deadline
                                                        and not yet swept) and was refreshed
    {"unknown", changed, "", "", ""}                    the broker is not live; nothing written
      changed  "1" when the stored DataVersion is missing or differs from the one compared, or
               a registration in chunks has not committed (register_commit.lua), else "0"
               (always "0" without arg_compare)
      counter, timestamp, stateVersion: the stored DataVersion
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"
--- @include "queue_data"

local cluster, addr, compare = arg_cluster, arg_addr, arg_compare == '1'
local bkey = k_broker(cluster, addr)
local fields = {'heartbeatTimeoutMillis', 'dataVersionCounter', 'dataVersionTimestamp',
  'stateVersion'}
local row = rcall('HMGET', bkey, unpack(fields))
if not row[1] then
  -- Past the deadline: revive from the registration record while the sweep has not run.
  local rkey = k_reg(cluster, addr)
  if rcall('ZSCORE', k_deadlines(), live_member(cluster, addr)) == false
      or rcall('HEXISTS', rkey, 'heartbeatTimeoutMillis') == 0 then
    return {'unknown', compare and '1' or '0', '', '', ''}
  end
  local r = rcall('HMGET', rkey, 'brokerName', 'brokerId', 'haServerAddr', 'zoneName',
    unpack(fields))
  rcall('HSET', bkey, 'cluster', cluster, 'brokerAddr', addr, 'brokerName', r[1],
    'brokerId', r[2], 'haServerAddr', r[3], 'zoneName', r[4], 'heartbeatTimeoutMillis', r[5],
    'dataVersionCounter', r[6], 'dataVersionTimestamp', r[7], 'stateVersion', r[8])
  row = {r[5], r[6], r[7], r[8]}
  touch_group(r[1])
  touch_none()
end
local now = now_ms()
local deadline = now + tonumber(row[1])
rcall('HSET', bkey, 'lastUpdateTimestamp', fmt(now))
rcall('PEXPIREAT', bkey, fmt(deadline))
rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
local changed = '0'
-- A registration in chunks that has not committed counts as changed: the broker registers
-- again and so completes it.
if compare and (row[2] ~= arg_dv_counter or row[3] ~= arg_dv_timestamp
    or row[4] ~= arg_state_version
    or rcall('HEXISTS', k_reg(cluster, addr), 'pending') == 1) then
  changed = '1'
end
publish_changes()
return {'ok', changed, row[2], row[3], row[4]}
