--[[
  The DataVersions of registrations a worker answered from its unchanged-chunk memo
  (nsfleet/store/unchanged_chunks.py; docs/architecture.md, "The unchanged re-registration"):
  for each broker, what register_broker.lua's few-command path would have written of that
  registration, the DataVersion and the liveness, and only while the registration the memo was
  filled from is still the broker's last (the same generation) and its live row exists; else a
  later registration, an unregistration or the sweep took over and nothing is written for it.
  O(1) per broker; a worker sends a bounded number of brokers per call.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}" (every other key is built from it, includes/keys.lua)
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterDataVersionArgs):
    ARGV[1..] arg_brokers    every ARGV item, 5 per broker: clusterName, brokerAddr, generation (of
                             the registration the memo was filled from), dataVersion counter,
                             dataVersion timestamp
  Output:
    {"ok", written}   written: how many brokers were written (the others were skipped)
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"

local written = 0
local brokers = arg_brokers
for i = 1, #brokers, 5 do
  local cluster, addr, generation = brokers[i], brokers[i + 1], brokers[i + 2]
  local dv_counter, dv_ts = brokers[i + 3], brokers[i + 4]
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
