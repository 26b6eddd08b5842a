--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "table_keys"
--- @include "topic_rows"
--- @include "group_routes"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  The candidate's removal cascade (lua/includes/cascade.lua over the per-topic hashes), shared by
  its unregister, its sweep and its fenced registration: the live row, registration record,
  deadline, connections and filter servers of (cluster, addr) while its record names group
  `name` (or is gone); the group's member entries with that address; an emptied group goes from
  every cluster and its field from every topic hash it is listed in (a topic left without
  fields leaves the topic list).
  Bounded script time: the group's lists are taken a list at a time while the call's row budget
  lasts (a list holds at most one registration chunk, but "+"); the lists left over are renamed
  to P:idx:cleanup-topics:<name> and the name added to P:idx:cleanups, drained by
  drain_cleanup.lua. Not mirrored: an acting-master group left without a master keeps its write
  perm here (today: clear_write_perm).
  Cost: O(min(topics of the group, budget) + clusters).
]]

-- A call's budget, as cascade.lua's: `rows` still to spend, `deferred` once work was left over.
local function new_budget(rows) return {rows = rows, deferred = false} end

-- Group `name`'s rows of the topics in list `lkey`, a list at a time while `budget` lasts; the
-- lists left over are renamed to `rest` (a cleanup record). Returns the rows removed and
-- whether lists were left over.
local function drop_listed(budget, name, lkey, rest)
  local removed = 0
  for _, f in ipairs(rcall('HKEYS', lkey)) do
    local text = rcall('HGET', lkey, f)
    local count = count_listed(text)
    if count > budget.rows then
      rcall('RENAME', lkey, rest)
      budget.deferred = true
      return removed, true
    end
    budget.rows = budget.rows - count
    for t in string.gmatch(text, LISTED) do
      if drop_row(t, name) then removed = removed + 1 end
    end
    rcall('HDEL', lkey, f)
  end
  return removed, false
end

-- Returns 1 when the group was removed, 0 when it was reduced or unknown. Spends `budget`.
local function remove_broker(budget, cluster, addr, name)
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
  local remaining, removed = 0, false
  for i = 1, #flat, 2 do
    if flat[i + 1] == addr then
      rcall('HDEL', mkey, flat[i])
      rcall('HDEL', k_member_clusters(name), addr)
      removed = true
    else
      remaining = remaining + 1
    end
  end
  if remaining == 0 then
    local _, left = drop_listed(budget, name, k_group_topics(name), k_cleanup_topics(name))
    if left then rcall('SADD', k_cleanups(), name) end
    rcall('DEL', k_group(name), mkey, k_group_topics(name), k_member_clusters(name))
    rcall('HDEL', k_route_groups(), name)
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
    touch_none()
    touch_group_topics(name)
  end
  return 0
end
