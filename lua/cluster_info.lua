--[[
  Read the cluster tables (GET_BROKER_CLUSTER_INFO, RouteInfoManager.getAllClusterInfo)
  consistently in one round trip, agreeing with routes on who is alive: a member whose live row
  has expired is left out before the sweep runs (each member's row is found under the cluster it
  registered in), a group with no live member is left out, and so is a cluster left empty.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    no ARGV[i]
  Output:
    {"ok", clusters, groups}
      clusters = {cluster1, {name, ...}, cluster2, {...}, ...}
      groups   = {{brokerName, cluster, enableActingMaster, zoneName, {id1, addr1, ...}}, ...}
]]
--- @include "rcall"
--- @include "keys"

local live_groups = {}  -- brokerName -> true when it has a live member
local groups = {}
local function group_of(name)
  if live_groups[name] ~= nil then return live_groups[name] end
  live_groups[name] = false
  local g = rcall('HMGET', k_group(name), 'cluster', 'enableActingMaster', 'zoneName')
  if not g[1] then return false end
  local member_clusters = {}
  local mc = rcall('HGETALL', k_member_clusters(name))
  for i = 1, #mc, 2 do member_clusters[mc[i]] = mc[i + 1] end
  local flat, live = rcall('HGETALL', k_members(name)), {}
  for i = 1, #flat, 2 do
    if rcall('EXISTS', k_broker(member_clusters[flat[i + 1]] or g[1], flat[i + 1])) == 1 then
      live[#live + 1] = flat[i]
      live[#live + 1] = flat[i + 1]
    end
  end
  if #live == 0 then return false end
  live_groups[name] = true
  groups[#groups + 1] = {name, g[1], g[2] or 'false', g[3] or '', live}
  return true
end

local clusters = {}
for _, cluster in ipairs(rcall('SMEMBERS', k_clusters())) do
  local names = {}
  for _, name in ipairs(rcall('SMEMBERS', k_cluster(cluster))) do
    if group_of(name) then names[#names + 1] = name end
  end
  if #names > 0 then
    clusters[#clusters + 1] = cluster
    clusters[#clusters + 1] = names
  end
end
return {'ok', clusters, groups}
