--[[
  A broker set moved from a Java controller (docs/controller.md, "Moving a running set"):
  its ids and addresses, master, masterEpoch, SyncStateSet and its epoch as the Java controller's
  GET_SYNC_STATE_DATA (1006) answers them, so the fleet's next election continues the brokers'
  epochs. Each replica Java saw alive counts alive for the grace (the time its brokers take to
  point controllerAddr at the fleet; their own heartbeats then take over), unless it already
  heartbeats the fleet. Fenced: a set the fleet has moved past is never written over.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerImportArgs):
    ARGV[1] arg_cluster          clusterName
    ARGV[2] arg_name             brokerName (the broker set)
    ARGV[3] arg_master_id        masterBrokerId ("" when the set has none)
    ARGV[4] arg_master_epoch     masterEpoch
    ARGV[5] arg_sss              syncStateSet, "1;2"
    ARGV[6] arg_sss_epoch        syncStateSetEpoch
    ARGV[7] arg_grace_ms         how long a replica Java saw alive counts alive here
    ARGV[8..] arg_replicas       "<id>;<address>;<1 alive|0>" per replica, the rest of ARGV
  Output:
    {"ok"}                       written
    {"same"}                     the fleet holds this state, or a newer one of the same master
                                 (a repeated import): nothing written
    {"behind", masterEpoch}      the fleet's masterEpoch is newer: nothing written
    {"conflict", masterId}       the same masterEpoch with another master: nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local name = arg_name
local skey = k_ctl_set(name)
local epoch, sss_epoch = tonumber(arg_master_epoch), tonumber(arg_sss_epoch)
local s = rcall('HMGET', skey, 'masterBrokerId', 'masterEpoch', 'syncStateSetEpoch',
  'nextBrokerId')
if s[2] then
  local held = tonumber(s[2])
  if held > epoch then return {'behind', s[2]} end
  if held == epoch and s[1] ~= arg_master_id then return {'conflict', s[1]} end
  if held == epoch and tonumber(s[3]) >= sss_epoch then return {'same'} end
end
local next_id = tonumber(s[4]) or 1
local now = now_ms()
local deadline = now + tonumber(arg_grace_ms)
local master_addr = ''
for _, row in ipairs(arg_replicas) do
  local id, addr, alive = string.match(row, '^([^;]+);([^;]*);([01])$')
  rcall('HSET', k_ctl_replica(name, id), 'brokerName', name, 'brokerId', id,
    'brokerAddress', addr, 'registerCheckCode', addr .. ';0')
  rcall('SADD', k_ctl_ids(name), id)
  if tonumber(id) >= next_id then next_id = tonumber(id) + 1 end
  if id == arg_master_id then master_addr = addr end
  local member = replica_member(name, id)
  local held = rcall('ZSCORE', k_ctl_deadlines(), member)
  if alive == '1' and (held == false or tonumber(held) < now) then
    if rcall('EXISTS', k_ctl_live(name, id)) == 0 then
      -- Ranked as an in-sync replica that reported nothing yet: its first 904 replaces it.
      rcall('HSET', k_ctl_live(name, id), 'clusterName', arg_cluster, 'brokerName', name,
        'brokerId', id, 'brokerAddr', addr, 'epoch', arg_master_epoch, 'maxOffset', '0',
        'confirmOffset', '0', 'electionPriority', '0', 'heartbeatTimeoutMills', arg_grace_ms,
        'lastUpdateTimestamp', fmt(now), 'connection', 'imported')
    end
    rcall('ZADD', k_ctl_deadlines(), fmt(deadline), member)
  end
end
rcall('HSET', skey, 'brokerName', name, 'clusterName', arg_cluster,
  'nextBrokerId', tostring(next_id), 'masterBrokerId', arg_master_id,
  'masterAddress', master_addr, 'masterEpoch', arg_master_epoch,
  'syncStateSet', id_text(id_list(arg_sss)), 'syncStateSetEpoch', arg_sss_epoch)
rcall('SADD', k_ctl_sets(), name)
return {'ok'}
