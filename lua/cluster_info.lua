--[[
  Read the cluster tables (GET_BROKER_CLUSTER_INFO, RouteInfoManager.getAllClusterInfo)
  consistently in one round trip.
  Like Java, this shows the tables as they are: members past their deadline stay until the sweep.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    (no ARGV[i])
  Output:
    {"ok", clusters, groups}
      clusters = {cluster1, {name, ...}, cluster2, {...}, ...}
      groups   = {{brokerName, cluster, enableActingMaster, zoneName, {id1, addr1, ...}}, ...}
]]
--- @include "keys"

local clusters, groups, seen = {}, {}, {}
for _, cluster in ipairs(rcall('SMEMBERS', k_clusters())) do
  local names = rcall('SMEMBERS', k_cluster(cluster))
  clusters[#clusters + 1] = cluster
  clusters[#clusters + 1] = names
  for _, name in ipairs(names) do
    if not seen[name] then
      seen[name] = true
      local g = rcall('HMGET', k_group(name), 'cluster', 'enableActingMaster', 'zoneName')
      if g[1] then
        groups[#groups + 1] = {name, g[1], g[2] or 'false', g[3] or '',
          rcall('HGETALL', k_members(name))}
      end
    end
  end
end
return {'ok', clusters, groups}
