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
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "queue_data"

local mode = arg_mode
local moved = qd_fence(false)
if moved then return moved end
if mode == 'cluster' then
  -- A group's lists may name a topic twice, or one it no longer has a row of (layout 2).
  local out, seen = {'ok'}, {}
  for _, name in ipairs(rcall('SMEMBERS', k_cluster(arg_cluster))) do
    for _, topic in ipairs(qd_group_topics(name)) do
      if not seen[topic] and qd_has_row(topic, name) then
        seen[topic] = true
        out[#out + 1] = topic
      end
    end
  end
  return out
end
local out = {'ok'}
for _, topic in ipairs(rcall('SMEMBERS', k_topics())) do
  local names = qd_topic_names(topic)
  table.sort(names)
  if #names > 0 then
    local _, _, _, f = qd_row(topic, names[1])
    local flag = tonumber(f) or 0
    local unit, unit_sub = flag % 2 == 1, math.floor(flag / 2) % 2 == 1
    if (mode == 'unit' and unit) or (mode == 'unit-sub' and unit_sub)
        or (mode == 'unit-sub-ununit' and unit_sub and not unit) then
      out[#out + 1] = topic
    end
  end
end
return out
