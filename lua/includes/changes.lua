--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  Change announcements. Every script that changes route-visible state or the cluster tables (what
  GET_BROKER_CLUSTER_INFO and the topic list show) records the topics it touched
  and calls publish_changes once at the end: P:rev is bumped and "<rev> <topics|*>" is published
  on P:changes for the workers' route caches, topic summaries and long-polls ("<rev> " alone when
  no route changed). Nothing is written per topic: a registration storm writes a queue row and
  its route index entry per row and no more (a counter key per topic was a measurable share of
  a first registration: bench/storm_floor.py); the ETag is a digest of the route's body, and
  the workers learn which topics changed from this message. The message format is defined once, in
  nsfleet/store/change_feed.py, whose parser the workers use; this file writes its first three
  forms. The topics touched are this call's own record, kept here and changed only through the
  functions below. A script stays short (Redis runs one at a time) by announcing a big group's
  topics as "*" (touch_group).
]]
-- The topics touched, in order. A topic touched twice is named twice (the readers drop a cache
-- entry per name): a set keyed by topic costs a storm more (bench/storm_floor.py).
local changed_topics = {}
local changed_count = 0
local changed_all = false
local changed_any = false

local function touch_topic(topic)
  changed_count = changed_count + 1
  changed_topics[changed_count] = topic
end
local function touch_topics(list)
  local n = changed_count
  for i = 1, #list do changed_topics[n + i] = list[i] end
  changed_count = n + #list
end
-- A change that may alter any route (group removed, filter servers, cluster tables).
local function touch_all() changed_all = true end
-- A change no route shows (the cluster tables of a group without topics, KV outside
-- ORDER_TOPIC_CONFIG): bump the counter only.
local function touch_none() changed_any = true end

-- What one call may still name topic by topic when a group's topics may all have changed
-- (queue_data.lua's touch_group): past 500 topics in one call (one big group, or many groups in
-- one sweep) they are announced as "any route may have changed" instead, so the message stays
-- bounded whatever the sizes (one refill per hot topic in every worker's cache).
local touch_group_budget = 500

-- redis.call takes a bounded number of arguments (Lua's C stack): big lists go by slices.
local SLICE = 1000

local function publish_changes()
  if changed_count == 0 and not changed_all and not changed_any then return nil end
  local rev = rcall('INCR', k_rev())
  local what = changed_all and '*' or table.concat(changed_topics, ',')
  rcall('PUBLISH', k_changes(), rev .. ' ' .. what)
  return rev
end
