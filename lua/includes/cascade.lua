--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "perms"
--- @include "changes"
--- @include "group_routes"
--- @include "queue_data"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  The removal cascade shared by unregister, the expiry sweep and the fenced register path
  (RouteInfoManager.unRegisterBroker + RouteInfoManager.cleanTopicByUnRegisterRequests):
  the live row, registration record (with its tables), deadline, connections and filter servers
  of (cluster, addr), while that address's registration record names group `name` (or is
  gone); every member entry of group `name` with that address (whatever its id); an emptied
  group leaves every cluster that lists it, an emptied cluster leaves the cluster set; the queue
  data of a removed group is deleted from every topic it served (with its static-topic mapping)
  and topics left empty are dropped; a reduced group with enableActingMaster and no master loses
  the write perm on its queue data.
  Bounded script time: a removed group's queue data is deleted inline while the call's budget
  lasts (a table from new_budget, passed to every function that spends it); past it, the group's
  topic set is renamed to P:idx:cleanup:<name> and the name added to P:idx:cleanups, a durable
  record that drain_cleanups (nsfleet/store/departures.py) empties in bounded calls (the caller
  at once, the sweep after a crash). The group row is gone at once, so routes already leave
  those rows out (route.lua needs the group row), and a registration of that brokerName waits
  until the drain is done. Clearing a reduced group's write perm past the budget is likewise
  left to clear_write_perm.lua (P:idx:perm-clears).
  Cost: O(min(topics of the group, budget) + clusters).
]]

-- A call's budget: `rows`, the queue rows its cascades may still remove or change inline, and
-- `deferred`, set once one of them left work to drain_cleanup.lua or clear_write_perm.lua.
local function new_budget(rows) return {rows = rows, deferred = false} end

-- True when the row had the write perm (and has it no more).
local function clear_topic_write_perm(topic, name)
  local _, _, p = qd_row(topic, name)
  local perm = tonumber(p)
  return perm ~= nil and writeable(perm) and qd_set_perm(topic, name, fmt(perm - 2))
end

-- per_topic(topic, name) over every topic of the group when they fit `budget` (which they
-- spend); otherwise defer() records the work for a chunked drain instead.
local function each_topic_within_budget(budget, name, per_topic, defer)
  local count = qd_group_topic_count(name)
  if count <= budget.rows then
    budget.rows = budget.rows - count
    for _, topic in ipairs(qd_group_topics(name)) do per_topic(topic, name) end
  else
    defer()
    budget.deferred = true
  end
end

-- A group too big for the budget is recorded in P:idx:perm-clears (brokerName -> SSCAN cursor)
-- and cleared by clear_write_perm.lua in chunks; routes already show its queue data without the
-- write perm meanwhile (route.lua).
local function clear_write_perm(budget, name)
  each_topic_within_budget(budget, name, clear_topic_write_perm, function()
    rcall('HSET', k_perm_clears(), name, '0')
  end)
end

-- Returns 1 when the group was removed, 0 when it was reduced or unknown. Spends `budget`.
local function remove_broker(budget, cluster, addr, name)
  -- The live row, registration record, filter servers and deadline of (cluster, addr) belong to
  -- the group that registered that address last. A removal naming another group (the address
  -- has since registered elsewhere, or the caller named the wrong group) leaves them alone:
  -- deleting them would hide the owner's member from its routes for good, as nothing would
  -- ever expire or sweep it.
  local owner = rcall('HGET', k_reg(cluster, addr), 'brokerName')
  if not owner or owner == name then
    rcall('DEL', k_broker(cluster, addr), k_reg(cluster, addr), k_tables(cluster, addr),
      k_conns(cluster, addr))
    if rcall('DEL', k_filters(cluster, addr)) == 1 then touch_all() end
    rcall('SREM', k_filtered(), live_member(cluster, addr))
    rcall('ZREM', k_deadlines(), live_member(cluster, addr))
  end
  if name == nil or name == '' then return 0 end
  local mkey = k_members(name)
  if rcall('EXISTS', k_group(name)) == 0 then return 0 end
  local flat = rcall('HGETALL', mkey)
  local remaining, has_master, removed = 0, false, false
  for i = 1, #flat, 2 do
    if flat[i + 1] == addr then
      rcall('HDEL', mkey, flat[i])
      rcall('HDEL', k_member_clusters(name), addr)
      removed = true
    else
      remaining = remaining + 1
      if flat[i] == '0' then has_master = true end
    end
  end
  if remaining == 0 then
    -- A group too big for the budget: its topic set becomes a durable cleanup record.
    each_topic_within_budget(budget, name, drop_queue, function() qd_defer_cleanup(name) end)
    qd_forget_group(name)
    rcall('DEL', k_group(name), mkey, k_member_clusters(name))
    drop_group_route(name)
    -- brokerName is global: the group leaves every cluster that lists it, not only the one the
    -- removal names (Java leaves it dangling in the others). O(clusters), a handful.
    for _, c in ipairs(rcall('SMEMBERS', k_clusters())) do
      if rcall('SREM', k_cluster(c), name) == 1 and rcall('SCARD', k_cluster(c)) == 0 then
        rcall('SREM', k_clusters(), c)
      end
    end
    touch_all()
    return 1
  end
  if removed then
    refresh_group_route(name)
    touch_none()  -- the cluster tables changed, even for a group without topics
    touch_group(name)
  end
  if not has_master and rcall('HGET', k_group(name), 'enableActingMaster') == 'true' then
    clear_write_perm(budget, name)
  end
  return 0
end
