--[[
  CLEAN_BROKER_DATA (1011): the admin removes a broker set, or some of its ids, from the
  controller (ReplicasInfoManager.cleanBrokerData, then its CleanBrokerDataEvent). Unless told to
  clean living brokers, a set with a master, or an id still alive, is refused. A set left with
  no id, or with an empty SyncStateSet, is removed whole (Java then knows it no more).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerCleanArgs):
    ARGV[1] arg_name             brokerName (the broker set)
    ARGV[2] arg_living           "1" = isCleanLivingBroker
    ARGV[3..] arg_ids            brokerControllerIdsToClean, the rest of ARGV (none: the whole set)
  Output:
    {"ok"}                       cleaned
    {"master"}                   2009: the set still has a master
    {"alive", id}                2009: an id to clean is still alive
    {"unknown"}                  2009: the set is unknown
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local name = arg_name
local skey = k_ctl_set(name)
local s = rcall('HMGET', skey, 'masterBrokerId', 'syncStateSet')
if arg_living ~= '1' then
  if #arg_ids == 0 and s[1] and s[1] ~= '' then return {'master'} end
  local now = now_ms()
  for _, id in ipairs(arg_ids) do
    if replica_alive(name, id, now) then return {'alive', id} end
  end
end
if not s[2] then return {'unknown'} end
local whole = #arg_ids == 0
if not whole then
  local sss = {}
  for _, id in ipairs(id_list(s[2])) do sss[id] = true end
  for _, id in ipairs(arg_ids) do
    rcall('DEL', k_ctl_replica(name, id))
    rcall('SREM', k_ctl_ids(name), id)
    sss[id] = nil
  end
  local left = {}
  for id in pairs(sss) do left[#left + 1] = id end
  rcall('HSET', skey, 'syncStateSet', id_text(left))
  whole = #left == 0 or rcall('SCARD', k_ctl_ids(name)) == 0
end
if whole then
  for _, id in ipairs(rcall('SMEMBERS', k_ctl_ids(name))) do
    rcall('DEL', k_ctl_replica(name, id))
  end
  rcall('DEL', skey, k_ctl_ids(name))
  rcall('SREM', k_ctl_sets(), name)
end
return {'ok'}
