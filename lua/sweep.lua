--[[
  Expire brokers whose deadline has passed (RouteInfoManager.scanNotActiveBroker), reading only
  what is due from the deadline zset, at most arg_batch per call, each with the unregister cascade.
  Safe to run from every worker at once: each call re-reads the zset inside the script, so a
  broker refreshed in the meantime is no longer due and a broker already removed is not found.
  The brokers removed are announced on P:changes as "0 @expired:<cluster>\t<addr>\n..." so every
  worker closes their connections, as Java closes an expired broker's channel.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, SweepArgs):
    ARGV[1] arg_now_ms              "now" in epoch ms, or "" for the Redis server clock
    ARGV[2] arg_batch               batch size (max brokers removed by this call)
    ARGV[3] arg_guard_share         mass-expiry guard share (0 < s <= 1), or "0" = guard off: when
                                    more than 4 brokers are live and more than this share of them is
                                    due, only brokers overdue by more than arg_guard_max_hold_ms are
                                    removed; the others are held
    ARGV[4] arg_guard_max_hold_ms   the guard's bound in ms: no broker is held longer than this past
                                    its deadline
    ARGV[5] arg_row_budget          the most queue rows the cascades of this call remove; past it a
                                    removed group's topics are left to drain_cleanup.lua
                                    (includes/cascade.lua)
  Output:
    {"ok", due, live, cleanup, cluster1, addr1, name1, cluster2, ...}
    {"held", due, live, cleanup, cluster1, addr1, name1, ...}   the guard held due brokers
      due: brokers due before this call; live: brokers in the deadline set before this call;
      cleanup "1" when queue data is left for drain_cleanup.lua;
      then one triple per removed broker
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"
--- @include "cascade"
--- @include "queue_data"

local moved = qd_fence(true)
if moved then return moved end
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
