--[[
  What the controller's periodic scans would act on (DefaultBrokerHeartbeatManager's
  scanNotActiveBroker and ReplicasInfoManager.scanNeedReelectBrokerSets), read in one call; the
  caller acts on each with controller_inactive.lua and controller_elect.lua, which check again.
  With nothing due it costs one ZRANGEBYSCORE and one SMEMBERS, plus a ZSCORE per set with a
  set when arg_reelect asks.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerScanArgs):
    ARGV[1] arg_batch            at most this many expired replicas
    ARGV[2] arg_reelect          "1" = also look for sets to re-elect (O(sets): every few scans)
  Output:
    {"ok", expired, sets}
      expired  flat list brokerName, brokerId of replicas past their deadline
      sets     (with arg_reelect) flat list, per broker set: brokerName, masterBrokerId ("" for
               none), masterEpoch, "1" when the master is alive, the SyncStateSet's size, "1"
               when any replica is alive (a set whose master is not alive while another replica
               is wants an election: scanNeedReelectBrokerSets)
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local now = now_ms()
local expired = {}
for _, member in ipairs(rcall('ZRANGEBYSCORE', k_ctl_deadlines(), '-inf', '(' .. fmt(now),
    'LIMIT', 0, tonumber(arg_batch))) do
  local name, id = string.match(member, '^(.*)\t([^\t]*)$')
  expired[#expired + 1] = name
  expired[#expired + 1] = id
end
local sets = {}
for _, name in ipairs(arg_reelect == '1' and rcall('SMEMBERS', k_ctl_sets()) or {}) do
  local s = rcall('HMGET', k_ctl_set(name), 'masterBrokerId', 'masterEpoch', 'syncStateSet')
  if s[2] then
    local master_alive = s[1] ~= '' and replica_alive(name, s[1], now)
    local any_alive = master_alive
    if not any_alive then
      for _, id in ipairs(rcall('SMEMBERS', k_ctl_ids(name))) do
        if replica_alive(name, id, now) then any_alive = true; break end
      end
    end
    for _, v in ipairs({name, s[1], s[2], master_alive and '1' or '0', tostring(#id_list(s[3])),
        any_alive and '1' or '0'}) do
      sets[#sets + 1] = v
    end
  end
end
return {'ok', expired, sets}
