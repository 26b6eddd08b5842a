--[[
  CONTROLLER_APPLY_BROKER_ID (1013): a broker claims an id in its broker set
  (ReplicasInfoManager.applyBrokerId, then its ApplyBrokerIdEvent). The first id of an unknown
  set must be 1, which creates the set; in a known set an id is granted when nobody holds it or
  when the same broker (its registerCheckCode) holds it already. Each id granted the first time
  advances nextBrokerId by one, as Java's does.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerApplyIdArgs):
    ARGV[1] arg_cluster          clusterName
    ARGV[2] arg_name             brokerName (the broker set)
    ARGV[3] arg_id               appliedBrokerId
    ARGV[4] arg_check_code       registerCheckCode, "<brokerAddress>;<epoch millis>"
  Output:
    {"ok"}                       the id is the broker's
    {"unregistered"}             an unknown set and an id other than 1: nothing written
    {"taken"}                    the id belongs to another broker: nothing written
]]
--- @include "rcall"
--- @include "keys"

local name, id, code = arg_name, arg_id, arg_check_code
local addr = string.match(code, '^([^;]*)')
local skey = k_ctl_set(name)
if rcall('EXISTS', skey) == 0 then
  if id ~= '1' then return {'unregistered'} end
  rcall('HSET', skey, 'brokerName', name, 'clusterName', arg_cluster, 'nextBrokerId', '1',
    'masterBrokerId', '', 'masterAddress', '', 'masterEpoch', '0', 'syncStateSet', '',
    'syncStateSetEpoch', '0')
  rcall('SADD', k_ctl_sets(), name)
end
local rkey = k_ctl_replica(name, id)
local held = rcall('HGET', rkey, 'registerCheckCode')
if held and held ~= code then return {'taken'} end
if not held then
  rcall('HSET', rkey, 'brokerName', name, 'brokerId', id, 'brokerAddress', addr,
    'registerCheckCode', code)
  rcall('SADD', k_ctl_ids(name), id)
  rcall('HINCRBY', skey, 'nextBrokerId', 1)
end
return {'ok'}
