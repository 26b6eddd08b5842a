--[[
  The controller's BROKER_HEARTBEAT (904, oneway; DefaultBrokerHeartbeatManager.onBrokerHeartbeat):
  a replica's liveness and what the election ranks it by, with its deadline, and the connection
  it came over (a broker heartbeats every controller address it has: each worker's connection).
  O(1): two HSETs and one ZADD, whatever the fleet's size.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], read as arg_<name> (nsfleet/store/scripts.py, ControllerHeartbeatArgs):
    ARGV[1] arg_cluster          clusterName
    ARGV[2] arg_name             brokerName (the broker set)
    ARGV[3] arg_addr             brokerAddr
    ARGV[4] arg_id               brokerId
    ARGV[5] arg_epoch            the broker's epoch (its newest master epoch)
    ARGV[6] arg_max_offset       maxOffset
    ARGV[7] arg_confirm_offset   confirmOffset
    ARGV[8] arg_timeout_ms       heartbeatTimeoutMills
    ARGV[9] arg_priority         electionPriority
    ARGV[10] arg_connection      "<worker>:<n>", the connection it came over
  Output:
    {"ok", deadline}             deadline: epoch ms
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"

local now = now_ms()
local deadline = now + tonumber(arg_timeout_ms)
rcall('HSET', k_ctl_live(arg_name, arg_id), 'clusterName', arg_cluster, 'brokerName', arg_name,
  'brokerId', arg_id, 'brokerAddr', arg_addr, 'epoch', arg_epoch, 'maxOffset', arg_max_offset,
  'confirmOffset', arg_confirm_offset, 'electionPriority', arg_priority,
  'heartbeatTimeoutMills', arg_timeout_ms, 'lastUpdateTimestamp', fmt(now),
  'connection', arg_connection)
rcall('HSET', k_ctl_conns(arg_name, arg_id), arg_connection, fmt(now))
rcall('ZADD', k_ctl_deadlines(), fmt(deadline), replica_member(arg_name, arg_id))
return {'ok', fmt(deadline)}
