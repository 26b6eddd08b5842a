--[[
  A replica stops being alive: its connection closed (BrokerHousekeepingService.onChannelClose)
  or its deadline passed (scanNotActiveBroker); if it was its set's master, the election follows
  in the same step (ControllerManager.onBrokerInactive), so a failure noticed by several
  workers at once is one election. A closed connection counts only when no other connection
  the replica heartbeats over is still in use: one whose worker is alive and whose last
  heartbeat is within the replica's timeout (a broker heartbeats every controller address it
  has, and one that moved to another worker stays alive). A
  deadline missed while the worker holding the replica's connection is itself dead (no presence
  key) is given ``arg_grace_ms`` more: the broker is finding another worker, not failing.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerInactiveArgs):
    ARGV[1] arg_name             brokerName (the broker set)
    ARGV[2] arg_id               brokerId
    ARGV[3] arg_connection       the closed connection "<worker>:<n>", "" = by deadline
    ARGV[4] arg_grace_ms         extra time while the replica's worker is dead (deadline only)
    ARGV[5] arg_unclean          "1" = enableElectUncleanMaster
  Output:
    {"kept"}                     still alive (or already gone): nothing written
    {"ok"}                       no longer alive; it was not its set's master
    {"ok", elect()'s answer...}  it was the master: the election's answer follows
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "controller"

local name, id = arg_name, arg_id
local member = replica_member(name, id)
local lkey = k_ctl_live(name, id)
local now = now_ms()
local deadline = rcall('ZSCORE', k_ctl_deadlines(), member)
if not deadline then return {'kept'} end
local conn = rcall('HGET', lkey, 'connection') or ''
local ckey = k_ctl_conns(name, id)
if arg_connection ~= '' then
  rcall('HDEL', ckey, arg_connection)
  local timeout = tonumber(rcall('HGET', lkey, 'heartbeatTimeoutMills') or '0')
  local others = rcall('HGETALL', ckey)
  for i = 1, #others, 2 do
    local worker = string.match(others[i], '^(.*):[^:]*$')
    if tonumber(others[i + 1]) + timeout >= now and worker
        and rcall('EXISTS', k_worker(worker)) == 1 then
      return {'kept'}
    end
  end
else
  deadline = tonumber(deadline)
  if deadline >= now then return {'kept'} end
  local worker = string.match(conn, '^(.*):[^:]*$')
  if worker and rcall('EXISTS', k_worker(worker)) == 0
      and deadline + tonumber(arg_grace_ms) >= now then
    return {'kept'}
  end
end
rcall('ZREM', k_ctl_deadlines(), member)
rcall('DEL', lkey, ckey)
if rcall('HGET', k_ctl_set(name), 'masterBrokerId') ~= id then return {'ok'} end
local out = {'ok'}
for _, v in ipairs(elect(name, nil, false, arg_unclean == '1', now)) do out[#out + 1] = v end
return out
