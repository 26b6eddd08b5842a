--[[
  The DataVersions of registrations a worker answered from its unchanged-chunk memo
  (nsfleet/store/unchanged_chunks.py; docs/architecture.md, "The unchanged re-registration"):
  for each broker, what register_broker.lua's few-command path would have written of that
  registration, the DataVersion and the liveness, and only while the registration the memo was
  filled from is still the broker's last (the same generation) and its live row exists; else a
  later registration, an unregistration or the sweep took over and nothing is written for it.
  O(1) per broker; a worker sends a bounded number of brokers per call.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}" (every other key is built from it, see keys.lua)
    ARGV[5i+1 .. 5i+5], for each broker i from 0:
      clusterName, brokerAddr, generation (of the registration the memo was filled from),
      dataVersion counter, dataVersion timestamp
  Output:
    {"ok", written}   written: how many brokers were written (the others were skipped)
]]
--- @include "keys"

local written = 0
for i = 1, #ARGV, 5 do
  local cluster, addr, generation = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local dv_counter, dv_ts = ARGV[i + 3], ARGV[i + 4]
  local rkey, bkey = k_reg(cluster, addr), k_broker(cluster, addr)
  local r = rcall('HMGET', rkey, 'generation', 'heartbeatTimeoutMillis')
  if r[1] == generation and r[2] and rcall('EXISTS', bkey) == 1 then
    -- As register_broker.lua's few-command path: the live row, its deadline and the
    -- registration record's DataVersion move; nothing is announced.
    local now = now_ms()
    local deadline = now + tonumber(r[2])
    rcall('HSET', bkey, 'lastUpdateTimestamp', fmt(now), 'dataVersionCounter', dv_counter,
      'dataVersionTimestamp', dv_ts)
    rcall('PEXPIREAT', bkey, fmt(deadline))
    rcall('HSET', rkey, 'dataVersionCounter', dv_counter, 'dataVersionTimestamp', dv_ts)
    rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
    written = written + 1
  end
end
return {'ok', written}
