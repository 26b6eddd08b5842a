--[[
  Delete a topic (DELETE_TOPIC_IN_NAMESRV, RouteInfoManager.deleteTopic): all its queue data, or
  only that of the broker groups of one cluster (the topic is dropped once no queue data is left;
  an unknown cluster is a no-op).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[1] topic
    ARGV[2] clusterName, or "" for the whole topic
    ARGV[3] the most queue rows to remove in this call (a topic served by more groups is
            deleted in several calls, each group's row whole)
  Output:
    {"ok", removed, left}
      removed  number of queue data rows removed; left: rows still to remove
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
local count = math.min(#names, tonumber(ARGV[3]))
for i = 1, count do drop_queue(topic, names[i]) end
publish_changes()
return {'ok', count, #names - count}
