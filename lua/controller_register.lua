--[[
  CONTROLLER_REGISTER_BROKER (1003): a broker with its id says where it listens
  (ReplicasInfoManager.registerBroker, then its UpdateBrokerAddressEvent when the address
  changed). Answers the set's master when that master is alive, and the SyncStateSet.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerRegisterArgs):
    ARGV[1] arg_name             brokerName (the broker set)
    ARGV[2] arg_id               brokerId
    ARGV[3] arg_addr             brokerAddress
  Output:
    {"ok", masterId, masterAddress, masterEpoch, syncStateSetEpoch, syncStateSet}
        masterId "" (and the three after it "") when the set has no live master;
        syncStateSet "1;2"; the two epochs are the set's
    {"unknown"}                  the broker set is unknown
    {"unassigned"}               the id is not the set's
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local name, id = arg_name, arg_id
local skey = k_ctl_set(name)
local s = rcall('HMGET', skey, 'masterBrokerId', 'masterEpoch', 'syncStateSet',
  'syncStateSetEpoch')
if not s[2] then return {'unknown'} end
local rkey = k_ctl_replica(name, id)
local held = rcall('HGET', rkey, 'brokerAddress')
if not held then return {'unassigned'} end
if held ~= arg_addr then
  rcall('HSET', rkey, 'brokerAddress', arg_addr)
  if s[1] == id then rcall('HSET', skey, 'masterAddress', arg_addr) end
end
if s[1] ~= '' and replica_alive(name, s[1], now_ms()) then
  local addr = rcall('HGET', k_ctl_replica(name, s[1]), 'brokerAddress') or ''
  return {'ok', s[1], addr, s[2], s[4], s[3]}
end
return {'ok', '', '', '', s[4], s[3]}
