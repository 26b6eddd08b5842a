--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  What a route shows of each broker group, kept in one hash so that route.lua reads it for every
  group of a route in one HMGET (P:idx:route-groups, brokerName -> entry): the group's cluster,
  enableActingMaster and zoneName, then each member's id, address and the cluster it registered
  under, by id:
    "<cluster>\t<enableActingMaster>\t<zoneName>" .. ("\n<id>\t<addr>\t<member cluster>")*
  Reading the group row, its members and their clusters per group cost route.lua three calls a
  group, most of a route read's Redis time (bench/route_cost.py). Derived from the group row,
  P:idx:members and P:idx:member-clusters, and rewritten by every script that changes them
  (register_broker.lua, includes/cascade.lua). A group without an entry (registered before this
  index existed, or the index deleted after an upgrade, docs/helm.md) is routed from an entry
  route.lua computes itself, and gets one at its next registration, the few-command path
  included. Whether any member has filter servers is kept apart, per member (P:idx:filtered, set
  in step 12 and by the cascade), since one address may be listed by more than one group.
  Beside the entries, while there is one, the hash holds the field HASHTABLE (a ':' no
  brokerName has) with a value longer than hash-max-listpack-value: it keeps the hash a hash
  table, where route.lua's HMGET finds each group at once. As a listpack (up to
  hash-max-listpack-entries groups: 128 in Redis, 512 in Valkey) each field it asks for is
  searched entry by entry, so a route's HMGET cost the square of its groups
  (bench/table_shape.py). Written with every entry (the same HSET); a store written before has
  it from its next group change.
]]

local HASHTABLE = ':hashtable'
local HASHTABLE_VALUE = 'keeps P:idx:route-groups a hash table (a value longer than '
  .. 'hash-max-listpack-value): lua/includes/group_routes.lua'

-- Group `name`'s entry from its row, members and their clusters; nil when it has no row.
local function group_route(name)
  local g = rcall('HMGET', k_group(name), 'cluster', 'enableActingMaster', 'zoneName')
  if not g[1] then return nil end
  local clusters = {}
  local mc = rcall('HGETALL', k_member_clusters(name))
  for i = 1, #mc, 2 do clusters[mc[i]] = mc[i + 1] end
  local flat = rcall('HGETALL', k_members(name))
  local ids = {}
  for i = 1, #flat, 2 do ids[#ids + 1] = flat[i] end
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
  local addrs = {}
  for i = 1, #flat, 2 do addrs[flat[i]] = flat[i + 1] end
  local parts = {g[1] .. '\t' .. (g[2] or 'false') .. '\t' .. (g[3] or '')}
  for _, id in ipairs(ids) do
    local addr = addrs[id]
    parts[#parts + 1] = id .. '\t' .. addr .. '\t' .. (clusters[addr] or g[1])
  end
  return table.concat(parts, '\n')
end

-- Group `name` gone: its entry goes, and the hash with it once no other is left.
local function drop_group_route(name)
  local key = k_route_groups()
  if rcall('HDEL', key, name) == 1 and rcall('HLEN', key) == 1
      and rcall('HEXISTS', key, HASHTABLE) == 1 then
    rcall('DEL', key)
  end
end

-- After a change to group `name`'s row, members or their clusters; the entry written, or nil.
local function refresh_group_route(name)
  local entry = group_route(name)
  if entry then
    rcall('HSET', k_route_groups(), name, entry, HASHTABLE, HASHTABLE_VALUE)
  else
    drop_group_route(name)
  end
  return entry
end

-- For a group that has no entry: write it, with its members' P:idx:filtered flags.
local function ensure_group_route(name)
  if rcall('HEXISTS', k_route_groups(), name) == 1 then return end
  local entry = refresh_group_route(name)
  if not entry then return end
  for addr, mcluster in string.gmatch(entry, '\n[^\t]*\t([^\t]*)\t([^\n]*)') do
    if rcall('EXISTS', k_filters(mcluster, addr)) == 1 then
      rcall('SADD', k_filtered(), live_member(mcluster, addr))
    end
  end
end
