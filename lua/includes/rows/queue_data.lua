--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "perms"
--- @include "changes"
--- @include "group_ids"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  Layout 1's queue data (docs/queue-data-layouts.md, the interface every layout implements): one
  hash per (topic, group) row P:queue:<t>:<b>, the route index P:idx:topic:<t> (the groups by
  number, includes/rows/group_ids.lua) and the group's topic set P:idx:broker-topics:<b>. What
  stores written before 2026-11-28 hold until they move to layout 2 (store/layout_move.py).
  Registration (step 10 of RouteInfoManager.registerBroker): the table comes as one argument of
  text, a line per topic (TABLE_ROW below), its numbers as decimal strings: both a Lua tostring
  per field and cjson-decoding the same rows as JSON arrays (a table per row) cost a first
  registration more Redis time than reading the lines with string.gmatch
  (bench/storm_floor.py). A stored topic name holds no control character
  (nsfleet.domain.validation.unstorable_character), so tabs and newlines cannot occur inside a
  field.
]]

-- This call's reading of P:layout (false until read).
local layout_seen = false

-- nil when the store is in layout 1 (and, for a write, not moving to layout 2); else the reply
-- that tells the worker to call the other assembly of the script.
local function qd_fence(writes)
  if not layout_seen then layout_seen = rcall('GET', k_layout()) or '1' end
  if layout_seen == '1' or (layout_seen == 'moving' and not writes) then return nil end
  return {'layout', layout_seen}
end

-- What a fresh group's row reads as (one table, not one per row).
local NO_ROW = {}

-- One line of a topic table: topic, readQueueNums, writeQueueNums, perm, topicSysFlag, separated
-- by tabs and ended by a newline (nsfleet.store.script_calls.table_chunks writes it).
local TABLE_ROW = '([^\t\n]*)\t([^\t\n]*)\t([^\t\n]*)\t([^\t\n]*)\t([^\t\n]*)\n'

-- The topics named by `text` (TABLE_ROW lines), as a set.
local function table_topics(text)
  local topics = {}
  for topic in string.gmatch(text, TABLE_ROW) do topics[topic] = true end
  return topics
end

-- Write `text` (TABLE_ROW lines, the numbers stored as they come) as group
-- `name`'s queue data: every topic when `force` (a first registration or a changed
-- DataVersion: Java's isTopicConfigChanged), else only those missing their row. `clear_write`
-- drops the write perm (a prime slave of an acting-master group). `fresh`: the group had no
-- queue data when the registration began, so every row is new and none is read first (a first
-- registration costs one HSET and one SADD per topic). Then the static-topic `mappings`
-- ({{topic, bname, TopicQueueMappingInfo JSON}, ...}). Touches what changed, and counts every
-- row added or changed in the group's topicsEpoch (what lets a registration skip this).
-- Returns how many rows it added (part of that count): an added row is in no table the broker
-- recorded before (includes/tables.lua), so only the other changes make those stale.
local function write_queues(name, text, mappings, force, clear_write, fresh)
  local added, n_added = {}, 0
  local rewritten = 0
  local added_rows = 0
  -- Per row, Lua's own work shows in a storm (a call to build the key and one to record the
  -- change): keys are joined inline and added rows announced as one list.
  local row_key, of_group = k_queue_parts(name)
  for topic, rq, wq, p, flag in string.gmatch(text, TABLE_ROW) do
    local qk = row_key .. topic .. of_group
    if force or rcall('EXISTS', qk) == 0 then
      if clear_write and writeable(tonumber(p)) then p = fmt(tonumber(p) - 2) end
      local cur = fresh and NO_ROW or
        rcall('HMGET', qk, 'readQueueNums', 'writeQueueNums', 'perm', 'topicSysFlag')
      if cur[1] ~= rq or cur[2] ~= wq or cur[3] ~= p or cur[4] ~= flag then
        rcall('HSET', qk, 'topic', topic, 'brokerName', name, 'readQueueNums', rq,
          'writeQueueNums', wq, 'perm', p, 'topicSysFlag', flag)
        if not cur[1] then
          n_added = n_added + 1
          added[n_added] = topic
        else
          rewritten = rewritten + 1
          touch_topic(topic)
        end
      end
    end
  end
  -- A row only exists with its indexes, so only a new row needs them (SADD is idempotent
  -- should a fresh group's row have been written meanwhile by REGISTER_TOPIC). Written after
  -- the rows rather than beside each: the route index's sets one after another cost Redis less
  -- (bench/storm_floor.py).
  if n_added > 0 then
    local index_key, id = k_topic_prefix(), group_id(name)
    for i = 1, n_added do rcall('SADD', index_key .. added[i], id) end
  end
  touch_topics(added)
  for from = 1, #added, SLICE do
    local slice = {unpack(added, from, math.min(from + SLICE - 1, #added))}
    rcall('SADD', k_topics(), unpack(slice))
    local new = rcall('SADD', k_broker_topics(name), unpack(slice))
    rewritten = rewritten + new
    added_rows = added_rows + new
  end
  for _, m in ipairs(mappings) do
    local mk = k_mappings(m[1])
    if rcall('HGET', mk, m[2]) ~= m[3] then
      rcall('HSET', mk, m[2], m[3])
      touch_topic(m[1])
      rewritten = rewritten + 1
    end
  end
  if rewritten > 0 then rcall('HINCRBY', k_group(name), 'topicsEpoch', rewritten) end
  return added_rows
end

-- Fresh forced chunks of several groups (register_topics_joint.lua): write_queues for each in
-- turn, a key per row leaving nothing to write jointly. By chunk: how far it advanced its
-- group's topicsEpoch, and the rows it added.
local function write_queues_joint(chunks)
  local out = {}
  for i, c in ipairs(chunks) do
    local gkey = k_group(c[1])
    local before = tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0')
    local added = write_queues(c[1], c[2], {}, true, c[3], true)
    out[i] = {tonumber(rcall('HGET', gkey, 'topicsEpoch') or '0') - before, added}
  end
  return out
end

-- Group reads.
local function qd_group_has_rows(name) return rcall('EXISTS', k_broker_topics(name)) == 1 end
local function qd_group_topic_count(name) return rcall('SCARD', k_broker_topics(name)) end
local function qd_group_row_count(name) return rcall('SCARD', k_broker_topics(name)) end
local function qd_group_topics(name) return rcall('SMEMBERS', k_broker_topics(name)) end
local function qd_group_page(name, cursor, count)
  local page = rcall('SSCAN', k_broker_topics(name), cursor, 'COUNT', count)
  return page[1], page[2]
end

-- Topic reads.
local function qd_topic_names(topic) return group_names_of(rcall('SMEMBERS', k_topic(topic))) end
-- Up to `limit` of them, and how many there are (layout 1 reads them all: it is leaving).
local function qd_topic_some_names(topic, limit)
  local all = qd_topic_names(topic)
  return {unpack(all, 1, math.min(limit, #all))}, #all
end
local function qd_row(topic, name)
  local q = rcall('HMGET', k_queue(topic, name), 'readQueueNums', 'writeQueueNums', 'perm',
    'topicSysFlag')
  if not q[1] then return nil end
  return q[1], q[2], q[3], q[4] or '0'
end
local function qd_has_row(topic, name) return rcall('EXISTS', k_queue(topic, name)) == 1 end
local function qd_topic_rows(topic)
  local names, values = {}, {}
  local all = qd_topic_names(topic)
  table.sort(all)
  for _, name in ipairs(all) do
    local rq, wq, perm, flag = qd_row(topic, name)
    if rq then
      names[#names + 1] = name
      values[#values + 1] = {rq, wq, perm, flag}
    end
  end
  return names, values
end
local function qd_topic_pairs(topic)
  local names, values = qd_topic_rows(topic)
  local flat = {}
  for i, name in ipairs(names) do
    flat[#flat + 1] = name
    flat[#flat + 1] = table.concat(values[i], '\t')
  end
  return flat
end

-- Writes.
local function drop_queue(topic, name)
  rcall('DEL', k_queue(topic, name))
  unindex_group(topic, name)
  if rcall('SREM', k_broker_topics(name), topic) == 1 and rcall('EXISTS', k_group(name)) == 1 then
    -- A queue row of the group went: its next registration must do the full work again
    -- (topicsEpoch counts every row of the group added, removed or changed).
    rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
  end
  rcall('HDEL', k_mappings(topic), name)
  if rcall('SCARD', k_topic(topic)) == 0 then
    rcall('SREM', k_topics(), topic)
    rcall('DEL', k_mappings(topic))
  end
  touch_topic(topic)
end

-- `_lists` (layout 2's list fields naming `topics`) mean nothing here: a set per group.
local function qd_drop_absent(name, topics, _lists)
  local btkey, n = k_broker_topics(name), 0
  for _, topic in ipairs(topics) do
    if rcall('SISMEMBER', btkey, topic) == 1 then
      drop_queue(topic, name)
      n = n + 1
    end
  end
  return n
end

local function qd_set_perm(topic, name, perm)
  local qk = k_queue(topic, name)
  if rcall('EXISTS', qk) == 0 then return false end
  rcall('HSET', qk, 'perm', perm)
  rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
  touch_topic(topic)
  return true
end

local function qd_put_row(topic, name, rq, wq, perm, flag)
  rcall('HSET', k_queue(topic, name), 'topic', topic, 'brokerName', name,
    'readQueueNums', rq, 'writeQueueNums', wq, 'perm', perm, 'topicSysFlag', flag)
  rcall('SADD', k_topic(topic), group_id(name))
  rcall('SADD', k_broker_topics(name), topic)
  rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
  rcall('SADD', k_topics(), topic)
  touch_topic(topic)
end


local function qd_defer_cleanup(name)
  rcall('RENAME', k_broker_topics(name), k_cleanup(name))
  rcall('SADD', k_cleanups(), name)
end

local function qd_drain(name, limit)
  local ckey = k_cleanup(name)
  local topics = rcall('SPOP', ckey, limit)
  for _, topic in ipairs(topics) do drop_queue(topic, name) end
  return #topics, rcall('SCARD', ckey)
end

local function qd_forget_group(name) rcall('DEL', k_broker_topics(name)) end

-- Every topic of group `name` may have changed (changes.lua's budget: past it, "*").
local function touch_group(name)
  if qd_fence(false) then
    touch_all()
    return
  end
  local count = rcall('SCARD', k_broker_topics(name))
  if count > touch_group_budget then
    touch_all()
  else
    touch_group_budget = touch_group_budget - count
    touch_topics(rcall('SMEMBERS', k_broker_topics(name)))
  end
end
