--- @include "keys"
--[[
  Change counters. Every script that changes route-visible state or the cluster tables (what
  GET_BROKER_CLUSTER_INFO and the topic list show) records the topics it touched
  and calls publish_changes once at the end: P:rev is bumped, each touched topic's rev is set to
  the new global rev (so a re-created topic never reuses an old ETag), and "<rev> <topics|*>" is
  published on P:changes for the workers' route caches and long-polls ("<rev> " alone when no
  route changed). The message format is defined once, in nsfleet/store/change_feed.py, whose
  parser the workers use; this file writes its first three forms. Uses KEYS[1] through keys.lua;
  takes no ARGV[i] of its own. A script stays short (Redis runs one at a time) by announcing a
  big group's topics as "*" (touch_group).
]]
local changed_topics = {}
local changed_all = false
local changed_any = false

local function touch_topic(topic) changed_topics[topic] = true end
-- A topic whose queue row this script wrote last: it is in P:idx:topics when the script ends, so
-- publish_changes sets its rev without asking (a registration storm writes one per row).
local function touch_written(topic) changed_topics[topic] = 'row' end
local function touch_topics(list) for _, t in ipairs(list) do changed_topics[t] = true end end
-- A change that may alter any route (group removed, filter servers, cluster tables).
local function touch_all() changed_all = true end
-- A change no route shows (the cluster tables of a group without topics, KV outside
-- ORDER_TOPIC_CONFIG): bump the counter only.
local function touch_none() changed_any = true end

-- Every topic of group `name` may have changed. Past 500 topics in one call (one big group, or
-- many groups in one sweep) they are announced as "any route may have changed" instead of topic
-- by topic, so the cost stays bounded whatever the sizes (one refill per hot topic in every
-- worker's cache, against tens of thousands of rev writes); those topics' revs do not move, and
-- their ETags change with their bodies (the ETag is the rev plus a digest of the body).
local touch_group_budget = 500
local function touch_group(name)
  local count = rcall('SCARD', k_broker_topics(name))
  if count > touch_group_budget then
    changed_all = true
  else
    touch_group_budget = touch_group_budget - count
    touch_topics(rcall('SMEMBERS', k_broker_topics(name)))
  end
end

-- redis.call takes a bounded number of arguments (Lua's C stack): big lists go by slices.
local SLICE = 1000

local function publish_changes()
  local names = {}
  for t in pairs(changed_topics) do names[#names + 1] = t end
  if #names == 0 and not changed_all and not changed_any then return nil end
  local rev = rcall('INCR', k_rev())
  local sets, asks = {}, {}
  for _, t in ipairs(names) do
    if changed_topics[t] == 'row' then
      sets[#sets + 1] = k_topic_rev(t)
      sets[#sets + 1] = rev
    else
      asks[#asks + 1] = t
    end
  end
  for from = 1, #asks, SLICE do
    local slice = {unpack(asks, from, math.min(from + SLICE - 1, #asks))}
    local present = rcall('SMISMEMBER', k_topics(), unpack(slice))
    local dels = {}
    for i, t in ipairs(slice) do
      if present[i] == 1 then
        sets[#sets + 1] = k_topic_rev(t)
        sets[#sets + 1] = rev
      else
        dels[#dels + 1] = k_topic_rev(t)
      end
    end
    if #dels > 0 then rcall('DEL', unpack(dels)) end
  end
  for from = 1, #sets, 2 * SLICE do
    rcall('MSET', unpack(sets, from, math.min(from + 2 * SLICE - 1, #sets)))
  end
  local what = changed_all and '*' or table.concat(names, ',')
  rcall('PUBLISH', k_changes(), rev .. ' ' .. what)
  return rev
end
