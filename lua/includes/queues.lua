--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "perms"
--- @include "changes"
--- @include "group_ids"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  Queue data of one broker group, written from a registration's topic table (step 10 of
  RouteInfoManager.registerBroker), shared by register_broker.lua (a table written in one call)
  and register_topics.lua (one chunk of a big table). The table comes as one argument of text, a
  line per topic (TABLE_ROW below), its numbers as decimal strings: both a Lua tostring per field
  and cjson-decoding the same rows as JSON arrays (a table per row) cost a first registration more
  Redis time than reading the lines with string.gmatch (bench/storm_floor.py). A stored topic name
  holds no control character (nsfleet.domain.validation.unstorable_character), so tabs and
  newlines cannot occur inside a field.
]]

-- What a fresh group's row reads as (one table, not one per row).
local NO_ROW = {}

-- One line of a topic table: topic, readQueueNums, writeQueueNums, perm, topicSysFlag, separated
-- by tabs and ended by a newline (nsfleet.store.script_calls.table_arg writes it).
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
