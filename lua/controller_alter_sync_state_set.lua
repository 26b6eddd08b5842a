--[[
  CONTROLLER_ALTER_SYNC_STATE_SET (1001): the master changes its set's in-sync replicas
  (ReplicasInfoManager.alterSyncStateSet, then its AlterSyncStateSetEvent), fenced by the master
  id, the masterEpoch and the syncStateSetEpoch it holds. Checks in Java's order.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerAlterSyncStateSetArgs):
    ARGV[1] arg_name             brokerName (the broker set)
    ARGV[2] arg_master_id        masterBrokerId the request names
    ARGV[3] arg_master_epoch     masterEpoch it names
    ARGV[4] arg_sss_epoch        the syncStateSetEpoch of the proposed set (its current one)
    ARGV[5..] arg_ids            the proposed SyncStateSet's ids (the rest of ARGV)
  Output:
    {"ok", newSyncStateSetEpoch, syncStateSet}     written
    {"unknown"}                  2013: the set is unknown
    {"same"}                     2013: the proposed set is the current one
    {"master", current}          2002: the master is another (current: its id, "" for none)
    {"fenced", current}          2000: the masterEpoch is another
    {"stale", current}           2001: the syncStateSetEpoch is another
    {"stranger", id}             2003: an id that is not the set's
    {"dead", id}                 2006: an id not alive
    {"leaderless", current}      2013: the proposed set leaves the master out
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local name = arg_name
local skey = k_ctl_set(name)
local s = rcall('HMGET', skey, 'masterBrokerId', 'masterEpoch', 'syncStateSet',
  'syncStateSetEpoch')
if not s[2] then return {'unknown'} end
local new, seen = {}, {}
for _, id in ipairs(arg_ids) do
  if not seen[id] then seen[id] = true; new[#new + 1] = id end
end
local new_text = id_text(new)
if new_text == s[3] then return {'same'} end
if s[1] == '' or s[1] ~= arg_master_id then return {'master', s[1]} end
if s[2] ~= arg_master_epoch then return {'fenced', s[2]} end
if s[4] ~= arg_sss_epoch then return {'stale', s[4]} end
local now = now_ms()
for _, id in ipairs(new) do
  if rcall('EXISTS', k_ctl_replica(name, id)) == 0 then return {'stranger', id} end
  if not replica_alive(name, id, now) then return {'dead', id} end
end
if not seen[s[1]] then return {'leaderless', s[1]} end
local epoch = tostring(tonumber(s[4]) + 1)
rcall('HSET', skey, 'syncStateSet', new_text, 'syncStateSetEpoch', epoch)
return {'ok', epoch, new_text}
