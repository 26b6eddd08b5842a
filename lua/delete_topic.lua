--[[
  Delete a topic (DELETE_TOPIC_IN_NAMESRV, RouteInfoManager.deleteTopic): all its queue data, or
  only that of the broker groups of one cluster (the topic is dropped once no queue data is left;
  an unknown cluster is a no-op).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] topic
    ARGV[2] clusterName, or "" for the whole topic
  Output:
    {"ok", removed}
      removed  number of queue data rows removed
]]
--- @include "keys"
--- @include "changes"
--- @include "cascade"

local topic, cluster = ARGV[1], ARGV[2]
local names
if cluster == '' then
  names = rcall('SMEMBERS', k_topic(topic))
else
  names = rcall('SINTER', k_topic(topic), k_cluster(cluster))
end
for _, name in ipairs(names) do drop_queue(topic, name) end
publish_changes()
return {'ok', #names}
