--[[
  Candidate (issue 42, Java's table shape): expire the brokers whose deadline has passed, with
  the candidate's removal cascade (includes/topic_cascade.lua); otherwise lua/sweep.lua (the
  deadline zset, the bounded batch, the mass-expiry guard, the "@expired" message).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, SweepArgs):
    ARGV[1] arg_now_ms              "now" in epoch ms, or "" for the Redis server clock
    ARGV[2] arg_batch               batch size (max brokers removed by this call)
    ARGV[3] arg_guard_share         mass-expiry guard share, or "0" = guard off
    ARGV[4] arg_guard_max_hold_ms   the guard's bound in ms
    ARGV[5] arg_row_budget          the most queue rows the cascades of this call remove
  Output:
    {"ok"|"held", due, live, cleanup, cluster1, addr1, name1, cluster2, ...}
      as lua/sweep.lua
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"
--- @include "topic_cascade"

local now = arg_now_ms ~= '' and tonumber(arg_now_ms) or now_ms()
local batch, share = tonumber(arg_batch), tonumber(arg_guard_share)
local max_hold = tonumber(arg_guard_max_hold_ms)
local budget = new_budget(tonumber(arg_row_budget))
local live = rcall('ZCARD', k_deadlines())
local due = rcall('ZCOUNT', k_deadlines(), '-inf', fmt(now))
if due == 0 then return {'ok', 0, live, '0'} end
local status, cutoff = 'ok', now
if share > 0 and live > 4 and due > live * share then
  status, cutoff = 'held', now - max_hold
end
local reply = {status, due, live, '0'}
local expired = {}
for _, member in ipairs(rcall('ZRANGEBYSCORE', k_deadlines(), '-inf', fmt(cutoff),
    'LIMIT', 0, batch)) do
  local tab = string.find(member, '\t', 1, true)
  local cluster, addr = string.sub(member, 1, tab - 1), string.sub(member, tab + 1)
  local name = rcall('HGET', k_reg(cluster, addr), 'brokerName') or ''
  remove_broker(budget, cluster, addr, name)
  reply[#reply + 1] = cluster
  reply[#reply + 1] = addr
  reply[#reply + 1] = name
  expired[#expired + 1] = member
end
publish_changes()
if budget.deferred then reply[4] = '1' end
if #expired > 0 then rcall('PUBLISH', k_changes(), '0 @expired:' .. table.concat(expired, '\n')) end
return reply
