--[[
  Topic lists that need more than one read: by cluster (GET_TOPICS_BY_CLUSTER,
  RouteInfoManager.getTopicsByCluster) and by the unit flags of the topic's first queue data
  (GET_UNIT_TOPIC_LIST and friends, RouteInfoManager.getUnitTopics, getHasUnitSubTopicList and
  getHasUnitSubUnUnitTopicList; "first" = the queue data of the alphabetically lowest broker
  name, as Java's HashMap order is not reproducible).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, TopicListArgs):
    ARGV[1] arg_mode       "cluster" | "unit" | "unit-sub" | "unit-sub-ununit"
    ARGV[2] arg_cluster    clusterName (mode "cluster" only)
  Output:
    {"ok", topic1, topic2, ...}   the topics, unsorted
]]
--- @include "rcall"
--- @include "keys"
--- @include "group_ids"

local mode = arg_mode
if mode == 'cluster' then
  local names = rcall('SMEMBERS', k_cluster(arg_cluster))
  local out = {'ok'}
  if #names == 0 then return out end
  local keys = {}
  for i, name in ipairs(names) do keys[i] = k_broker_topics(name) end
  for _, topic in ipairs(rcall('SUNION', unpack(keys))) do out[#out + 1] = topic end
  return out
end
local out = {'ok'}
for _, topic in ipairs(rcall('SMEMBERS', k_topics())) do
  local names = group_names_of(rcall('SMEMBERS', k_topic(topic)))
  table.sort(names)
  if #names > 0 then
    local flag = tonumber(rcall('HGET', k_queue(topic, names[1]), 'topicSysFlag')) or 0
    local unit, unit_sub = flag % 2 == 1, math.floor(flag / 2) % 2 == 1
    if (mode == 'unit' and unit) or (mode == 'unit-sub' and unit_sub)
        or (mode == 'unit-sub-ununit' and unit_sub and not unit) then
      out[#out + 1] = topic
    end
  end
end
return out
