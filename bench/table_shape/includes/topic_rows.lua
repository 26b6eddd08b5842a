--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "perms"
--- @include "changes"
--- @include "table_keys"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  The candidate layout's queue data (issue 42): one hash per topic, a field per broker group, and
  per group the topics it serves as one value per registration chunk (includes/table_keys.lua).
  The candidate of lua/includes/queues.lua and of the per-topic half of lua/includes/cascade.lua.
  A registration's table comes as today (a line per row: topic, readQueueNums, writeQueueNums,
  perm, topicSysFlag, tab-separated, nsfleet.store.script_calls.table_arg): the four numbers, as
  one capture, are the packed value, so packing costs the script nothing.
  A group's lists are a superset of the topics it has a row of: a topic a chunk stops naming
  whose row stays (the broker no longer sends it and deleteTopicWithBrokerRegistration is off, or
  it moved to another chunk as chunk boundaries shifted) goes to the field "+" (no topic twice in
  it), and a topic whose row was removed (by deleteTopicWithBrokerRegistration) leaves it. A topic
  listed twice costs the cascade one HDEL that finds nothing.
]]

-- One line of a topic table: the topic, then its QueueData as stored (the packed value).
local ROW = '([^\t\n]*)\t([^\n]*)\n'
-- The field of P:idx:group-topics:<name> listing topics no chunk names whose row stays.
local EXTRA = '+'
local LISTED = '[^\n]+'

-- The packed value without the write perm (a prime slave of an acting-master group).
local function without_write(value)
  local rq, wq, p, flag = string.match(value, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  local perm = tonumber(p)
  if perm and writeable(perm) then
    return rq .. '\t' .. wq .. '\t' .. fmt(perm - 2) .. '\t' .. flag
  end
  return value
end

-- Add `topics` to group `name`'s field "+", each once.
local function add_extras(name, topics)
  if #topics == 0 then return end
  local lkey = k_group_topics(name)
  local old = rcall('HGET', lkey, EXTRA)
  local have, out = {}, {}
  if old then
    for t in string.gmatch(old, LISTED) do have[t] = true end
    out[1] = old
  end
  for _, t in ipairs(topics) do
    if not have[t] then
      have[t] = true
      out[#out + 1] = t
    end
  end
  rcall('HSET', lkey, EXTRA, table.concat(out, '\n'))
end

-- Chunk `chunk` of group `name`'s lists now names `topics`; a topic it named before and names no
-- more keeps being listed (in "+") while the group still has its row.
local function list_chunk(name, chunk, topics, fresh)
  local lkey = k_group_topics(name)
  local text = table.concat(topics, '\n')
  local old = (not fresh) and rcall('HGET', lkey, chunk) or false
  if old == text then return end
  rcall('HSET', lkey, chunk, text)
  if not old then return end
  local named, kept = {}, {}
  for _, t in ipairs(topics) do named[t] = true end
  for t in string.gmatch(old, LISTED) do
    if not named[t] and rcall('HEXISTS', k_topic_routes(t), name) == 1 then kept[#kept + 1] = t end
  end
  add_extras(name, kept)
end

-- Write chunk `chunk` of a registration's table (`text`) as group `name`'s queue data: every
-- topic when `force`, else only those missing the group's field (as queues.lua's write_queues).
-- `fresh`: the group had no queue data when the registration began, so nothing is read first.
-- Returns (rows added, rows added or changed).
local function write_rows(name, chunk, text, mappings, force, clear_write, fresh)
  local prefix = k_topic_routes_prefix()
  local topics, n = {}, 0
  local added, n_added, rewritten = {}, 0, 0
  for topic, value in string.gmatch(text, ROW) do
    n = n + 1
    topics[n] = topic
    local tk = prefix .. topic
    if clear_write then value = without_write(value) end
    if fresh or force then
      local cur = (not fresh) and rcall('HGET', tk, name) or nil
      if cur ~= value then
        if rcall('HSET', tk, name, value) == 1 then
          n_added = n_added + 1
          added[n_added] = topic
        else
          rewritten = rewritten + 1
          touch_topic(topic)
        end
      end
    elseif rcall('HSETNX', tk, name, value) == 1 then
      n_added = n_added + 1
      added[n_added] = topic
    end
  end
  touch_topics(added)
  for from = 1, n_added, SLICE do
    rcall('SADD', k_topics(), unpack(added, from, math.min(from + SLICE - 1, n_added)))
  end
  if chunk ~= '' then list_chunk(name, chunk, topics, fresh) end
  for _, m in ipairs(mappings) do
    local mk = k_mappings(m[1])
    if rcall('HGET', mk, m[2]) ~= m[3] then
      rcall('HSET', mk, m[2], m[3])
      touch_topic(m[1])
      rewritten = rewritten + 1
    end
  end
  local delta = n_added + rewritten
  if delta > 0 then rcall('HINCRBY', k_group(name), 'topicsEpoch', delta) end
  return n_added, delta
end

-- Remove group `name`'s row of `topic` (with its static-topic mapping); a topic left without
-- rows leaves the topic list. True when there was a row.
local function drop_row(topic, name)
  local tk = k_topic_routes(topic)
  if rcall('HDEL', tk, name) == 0 then return false end
  if rcall('EXISTS', tk) == 0 then
    rcall('SREM', k_topics(), topic)
    rcall('DEL', k_mappings(topic))
  else
    rcall('HDEL', k_mappings(topic), name)
  end
  touch_topic(topic)
  return true
end

-- deleteTopicWithBrokerRegistration: remove group `name`'s rows of the topics in `text` (a line
-- each) and their entries in "+" (the chunks that named them were rewritten without them).
-- Returns how many rows went.
local function drop_absent(name, text)
  local gone, n = {}, 0
  for topic in string.gmatch(text, LISTED) do
    if drop_row(topic, name) then
      gone[topic] = true
      n = n + 1
    end
  end
  if n == 0 then return 0 end
  rcall('HINCRBY', k_group(name), 'topicsEpoch', n)
  local lkey = k_group_topics(name)
  local old = rcall('HGET', lkey, EXTRA)
  if old then
    local out = {}
    for t in string.gmatch(old, LISTED) do
      if not gone[t] then out[#out + 1] = t end
    end
    if #out == 0 then
      rcall('HDEL', lkey, EXTRA)
    else
      rcall('HSET', lkey, EXTRA, table.concat(out, '\n'))
    end
  end
  return n
end

-- After a registration written in `chunks` chunks: the fields of later chunks (a longer table
-- before) go, their topics whose row stays moving to "+".
local function trim_chunks(name, chunks)
  local lkey = k_group_topics(name)
  local kept = {}
  for _, f in ipairs(rcall('HKEYS', lkey)) do
    if f ~= EXTRA and tonumber(f) > chunks then
      for t in string.gmatch(rcall('HGET', lkey, f), LISTED) do
        if rcall('HEXISTS', k_topic_routes(t), name) == 1 then kept[#kept + 1] = t end
      end
      rcall('HDEL', lkey, f)
    end
  end
  add_extras(name, kept)
end

-- How many topics a list value names.
local function count_listed(text)
  local _, newlines = string.gsub(text, '\n', '')
  return newlines + 1
end

-- Every topic of group `name` may have changed (changes.lua's touch_group over the lists):
-- past its budget, announced as "any route may have changed".
local function touch_group_topics(name)
  local lkey = k_group_topics(name)
  local texts = {}
  for _, f in ipairs(rcall('HKEYS', lkey)) do
    local text = rcall('HGET', lkey, f)
    local count = count_listed(text)
    if count > touch_group_budget then
      touch_all()
      return
    end
    touch_group_budget = touch_group_budget - count
    texts[#texts + 1] = text
  end
  for _, text in ipairs(texts) do
    for t in string.gmatch(text, LISTED) do touch_topic(t) end
  end
end
