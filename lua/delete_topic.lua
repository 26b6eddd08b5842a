--[[
  Delete a topic (DELETE_TOPIC_IN_NAMESRV, RouteInfoManager.deleteTopic): all its queue data, or
  only that of the broker groups of one cluster (the topic is dropped once no queue data is left;
  an unknown cluster is a no-op).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, DeleteTopicArgs):
    ARGV[1] arg_topic      topic
    ARGV[2] arg_cluster    clusterName, or "" for the whole topic
    ARGV[3] arg_limit      the most queue rows to remove in this call (a topic served by more groups
                           is deleted in several calls, each group's row whole)
  Output:
    {"ok", removed, left}
      removed  number of queue data rows removed; left: rows still to remove
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "changes"
--- @include "queue_data"

local topic, cluster, limit = arg_topic, arg_cluster, tonumber(arg_limit)
local moved = qd_fence(true)
if moved then return moved end
local names, left
if cluster == '' then
  local total
  names, total = qd_topic_some_names(topic, limit)
  left = total - #names
else
  names = {}
  local all = qd_topic_names(topic)
  for from = 1, #all, SLICE do
    local upto = math.min(from + SLICE - 1, #all)
    local in_cluster = rcall('SMISMEMBER', k_cluster(cluster), unpack(all, from, upto))
    for i = from, upto do
      if in_cluster[i - from + 1] == 1 then names[#names + 1] = all[i] end
    end
  end
  left = math.max(#names - limit, 0)
end
local count = math.min(#names, limit)
for i = 1, count do drop_queue(topic, names[i]) end
publish_changes()
return {'ok', count, left}
