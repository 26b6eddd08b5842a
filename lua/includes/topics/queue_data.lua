--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "perms"
--- @include "changes"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  Layout 2's queue data (docs/queue-data-layouts.md, the interface every layout implements):
  Java's topicQueueTable, one hash per topic P:topic:<t> (brokerName -> "rq\twq\tperm\tflag"),
  and per group the topics it serves as lists, P:idx:group-topics:<b> (field -> topics joined by
  "\n"; every field is a list but COUNTER, which numbers them). Less memory and Redis time than
  layout 1 on every measure: docs/table-shape.md.
  A registration's table comes as one argument of text, a line per topic (ROW below: topic,
  readQueueNums, writeQueueNums, perm, topicSysFlag, tab-separated,
  nsfleet.store.script_calls.table_chunks): the four numbers, as one capture, are the stored value,
  so packing costs the script nothing. A stored topic name holds no control character
  (nsfleet.domain.validation.unstorable_character), so tabs and newlines cannot occur in one.
  The lists change only when rows are added or removed, however a broker slices its table (a
  5.x split registration sends it as several registrations of 800 topics; a big one is written
  in chunks): a call that adds rows appends their topics as one new field, numbered by COUNTER,
  and deleteTopicWithBrokerRegistration (a batch) rewrites the lists once without the rows it
  removed. So re-registrations and rewrites of existing rows write no list. A row removed one at
  a time (the removal cascade, whose lists go with the group; a cleanup record's drain;
  DELETE_TOPIC, per group: rewriting the lists there would read MBs per topic) leaves its topic
  listed: the lists are a superset of the group's rows. A listed topic without a row costs the
  cascade one HDEL that finds nothing; if its row comes back, the topic is listed twice (readers
  dedupe or tolerate it).
]]

-- This call's reading of P:layout (false until read).
local layout_seen = false

-- nil when the store is in layout 2; else the reply that tells the worker to call the other
-- assembly of the script (a store moving to layout 2 is read from layout 1's keys until done).
local function qd_fence(_writes)
  if not layout_seen then layout_seen = rcall('GET', k_layout()) or '1' end
  if layout_seen == '2' then return nil end
  return {'layout', layout_seen}
end

-- One line of a topic table: the topic, then its four numbers as stored (the value).
local ROW = '([^\t\n]*)\t([^\n]*)\n'
-- A stored value's four numbers.
local VALUE = '^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$'
-- One topic of a list.
local LISTED = '[^\n]+'
-- The field of a group's lists that numbers them (HINCRBY): the next list is field "<n>", so no
-- two calls write the same field, whatever fields were emptied since.
local COUNTER = '#'

-- The topics named by `text` (ROW lines), as a set.
local function table_topics(text)
  local topics = {}
  for topic in string.gmatch(text, ROW) do topics[topic] = true end
  return topics
end

-- How many topics a list names (counted in C: a group's lists are read whole).
local function count_listed(text)
  local _, n = string.gsub(text, LISTED, '')
  return n
end

-- The lists of hash `key`: its list fields (in no order), field -> text, and COUNTER's value.
local function read_lists(key)
  local flat = rcall('HGETALL', key)
  local fields, texts, last = {}, {}, 0
  for i = 1, #flat, 2 do
    if flat[i] == COUNTER then
      last = tonumber(flat[i + 1]) or 0
    else
      fields[#fields + 1] = flat[i]
      texts[flat[i]] = flat[i + 1]
    end
  end
  return fields, texts, last
end

-- The list fields in a stable order (HGETALL's changes as the hash grows) where a list appended
-- during a paged walk comes after the pages already read: the move's "m<n>" (written before any
-- other, store/layout_move.py), then ours, "1" to COUNTER's `last`, counted rather than sorted
-- (REGISTER_TOPIC's rows are a field each: there may be thousands).
local function in_order(fields, texts, last)
  local out = {}
  for _, f in ipairs(fields) do
    if not string.match(f, '^%d+$') then out[#out + 1] = f end
  end
  table.sort(out)
  for n = 1, last do
    if texts[tostring(n)] then out[#out + 1] = tostring(n) end
  end
  return out
end

-- List `topics` (rows just added to group `name`) as one new field of its lists.
local function list_added(name, topics)
  if #topics == 0 then return end
  local lkey = k_group_topics(name)
  local field = rcall('HINCRBY', lkey, COUNTER, 1)
  rcall('HSET', lkey, tostring(field), table.concat(topics, '\n'))
end

-- The value without the write perm (a prime slave of an acting-master group).
local function without_write(value)
  local rq, wq, p, flag = string.match(value, VALUE)
  local perm = tonumber(p)
  if perm and writeable(perm) then
    return rq .. '\t' .. wq .. '\t' .. fmt(perm - 2) .. '\t' .. flag
  end
  return value
end

-- Write `text` (ROW lines) as group `name`'s queue data: every topic compared and written when
-- different when `force` (a first registration or a changed DataVersion: Java's
-- isTopicConfigChanged), else only those missing their row (HSETNX). `clear_write` drops the
-- write perm (a prime slave of an acting-master group). `fresh`: the group had no queue data
-- when the registration began, so nothing is read first (one HSET per topic). The rows added
-- are listed in one new field. Then the static-topic `mappings` ({{topic, bname,
-- TopicQueueMappingInfo JSON}, ...}). Touches what changed and counts every row added or
-- changed in the group's topicsEpoch (what lets a registration skip this). Returns how many rows
-- it added (part of that count).
local function write_queues(name, text, mappings, force, clear_write, fresh)
  local prefix = k_topic_routes_prefix()
  local added, n_added, rewritten = {}, 0, 0
  local compare = force and not fresh
  for topic, value in string.gmatch(text, ROW) do
    local tk = prefix .. topic
    if clear_write then value = without_write(value) end
    local new
    if compare then
      local cur = rcall('HGET', tk, name)
      if cur ~= value then
        rcall('HSET', tk, name, value)
        new = not cur
        if cur then
          rewritten = rewritten + 1
          touch_topic(topic)
        end
      end
    elseif force then
      -- Fresh: a row REGISTER_TOPIC wrote meanwhile is overwritten, as a forced write does.
      new = rcall('HSET', tk, name, value) == 1
      if not new then
        rewritten = rewritten + 1
        touch_topic(topic)
      end
    else
      new = rcall('HSETNX', tk, name, value) == 1
    end
    if new then
      n_added = n_added + 1
      added[n_added] = topic
    end
  end
  touch_topics(added)
  for from = 1, n_added, SLICE do
    rcall('SADD', k_topics(), unpack(added, from, math.min(from + SLICE - 1, n_added)))
  end
  list_added(name, added)
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
  return n_added
end

-- write_queues(name, text, {}, true, clear_write, true) for several groups at once, each chunk
-- {name, text, clear_write} of another group (register_topics_joint.lua): a topic in several
-- chunks is one HSET of a field per group, so one redis.call writes rows of several groups
-- (the call, not the field, is most of a row's cost: docs/table-shape.md, the tenth pass).
-- A topic's HSET that adds fewer fields than it names found some rows there already (written
-- meanwhile, as a fresh write overwrites): which ones is unknown, so none of its rows counts as
-- added, and all are listed (the lists stay a superset of the rows). Returns, by chunk, how far
-- it advanced its group's topicsEpoch (a row written, one) and the rows it counts as added.
local function write_queues_joint(chunks)
  local prefix = k_topic_routes_prefix()
  local order, fields = {}, {}
  for _, c in ipairs(chunks) do
    local name, clear_write = c[1], c[3]
    for topic, value in string.gmatch(c[2], ROW) do
      if clear_write then value = without_write(value) end
      local f = fields[topic]
      if f then
        f[#f + 1] = name
        f[#f + 1] = value
      else
        fields[topic] = {name, value}
        order[#order + 1] = topic
      end
    end
  end
  local listed, counted, written = {}, {}, {}
  for _, c in ipairs(chunks) do
    listed[c[1]], counted[c[1]], written[c[1]] = {}, 0, 0
  end
  for _, topic in ipairs(order) do
    local f = fields[topic]
    local all_new = rcall('HSET', prefix .. topic, unpack(f)) * 2 == #f
    for i = 1, #f, 2 do
      local name = f[i]
      local l = listed[name]
      l[#l + 1] = topic
      written[name] = written[name] + 1
      if all_new then counted[name] = counted[name] + 1 end
    end
  end
  touch_topics(order)
  for from = 1, #order, SLICE do
    rcall('SADD', k_topics(), unpack(order, from, math.min(from + SLICE - 1, #order)))
  end
  local out = {}
  for i, c in ipairs(chunks) do
    local name = c[1]
    list_added(name, listed[name])
    if written[name] > 0 then rcall('HINCRBY', k_group(name), 'topicsEpoch', written[name]) end
    out[i] = {written[name], counted[name]}
  end
  return out
end

-- Group reads.
local function qd_group_has_rows(name) return rcall('EXISTS', k_group_topics(name)) == 1 end

local function qd_group_topics(name)
  local fields, texts = read_lists(k_group_topics(name))
  local topics = {}
  for _, f in ipairs(fields) do
    for t in string.gmatch(texts[f], LISTED) do topics[#topics + 1] = t end
  end
  return topics
end

-- How many topics the lists `texts` (of `fields`) name.
local function count_lists(fields, texts)
  local count = 0
  for _, f in ipairs(fields) do count = count + count_listed(texts[f]) end
  return count
end

local function qd_group_topic_count(name) return count_lists(read_lists(k_group_topics(name))) end

local function qd_group_row_count(name)
  local seen, count = {}, 0
  local prefix = k_topic_routes_prefix()
  for _, t in ipairs(qd_group_topics(name)) do
    if not seen[t] then
      seen[t] = true
      count = count + rcall('HEXISTS', prefix .. t, name)
    end
  end
  return count
end

-- The cursor counts the listed topics visited, over the fields in their order (a list removed
-- or shortened before the cursor between two calls makes the walk skip as many topics).
local function qd_group_page(name, cursor, count)
  local fields, texts, last = read_lists(k_group_topics(name))
  fields = in_order(fields, texts, last)
  local skip, want = tonumber(cursor) or 0, math.max(tonumber(count) or 1, 1)
  local page, total = {}, 0
  for _, f in ipairs(fields) do
    local n = count_listed(texts[f])
    if #page < want and total + n > skip then
      local at = total
      for t in string.gmatch(texts[f], LISTED) do
        at = at + 1
        if at > skip then
          page[#page + 1] = t
          if #page == want then break end
        end
      end
    end
    total = total + n
  end
  local next_cursor = skip + #page
  if next_cursor >= total then return '0', page end
  return tostring(next_cursor), page
end

-- Topic reads.
local function qd_topic_names(topic) return rcall('HKEYS', k_topic_routes(topic)) end

-- Up to `limit` of them (any), and how many there are: O(limit), however many groups serve the
-- topic (a deletion in calls of `limit` rows read them all in each call before).
local function qd_topic_some_names(topic, limit)
  local key = k_topic_routes(topic)
  -- (`or {}`: a missing key answers nil to some Redis emulations, an empty array to Redis.)
  return rcall('HRANDFIELD', key, limit) or {}, rcall('HLEN', key)
end

local function qd_row(topic, name)
  local value = rcall('HGET', k_topic_routes(topic), name)
  if not value then return nil end
  return string.match(value, VALUE)
end

local function qd_has_row(topic, name)
  return rcall('HEXISTS', k_topic_routes(topic), name) == 1
end

-- The topic's hash as it is: its rows' values need no split, nor its names a sort.
local function qd_topic_pairs(topic) return rcall('HGETALL', k_topic_routes(topic)) end

local function qd_topic_rows(topic)
  local flat = rcall('HGETALL', k_topic_routes(topic))
  local names, of = {}, {}
  for i = 1, #flat, 2 do
    names[#names + 1] = flat[i]
    of[flat[i]] = flat[i + 1]
  end
  table.sort(names)
  local values = {}
  for i, name in ipairs(names) do values[i] = {string.match(of[name], VALUE)} end
  return names, values
end

-- Remove group `name`'s row of `topic` (with its static-topic mapping); a topic left without
-- rows leaves the topic list. True when there was a row. The lists are not read (header).
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

-- A row removed counts in topicsEpoch while the group row exists (its next registration must
-- do the full work again); a removed group's cleanup leaves no group row to count in.
local function count_removed(name, n)
  if n > 0 and rcall('EXISTS', k_group(name)) == 1 then
    rcall('HINCRBY', k_group(name), 'topicsEpoch', n)
  end
end

local function drop_queue(topic, name)
  if drop_row(topic, name) then count_removed(name, 1) end
end

-- deleteTopicWithBrokerRegistration: the rows go, and in a call that removed any, the lists are
-- rewritten once without them (a list emptied goes; the key goes with the last one). `lists`:
-- the list fields that name `topics`, as the caller read them (a registration in chunks reads
-- the group's lists first), so only those are read and rewritten: reading every list in each
-- call made a big group's calls grow with the group (bench/script_time.py, delete_absent). nil:
-- every list (a topic listed only in a field not named stays listed: the lists are a superset).
local function qd_drop_absent(name, topics, lists)
  local gone, n = {}, 0
  for _, topic in ipairs(topics) do
    if drop_row(topic, name) then
      gone[topic] = true
      n = n + 1
    end
  end
  if n == 0 then return 0 end
  count_removed(name, n)
  local lkey = k_group_topics(name)
  local fields, texts = {}, {}
  if lists then
    for i = 1, #lists, SLICE do
      local part = {unpack(lists, i, math.min(i + SLICE - 1, #lists))}
      local got = rcall('HMGET', lkey, unpack(part))
      for j, f in ipairs(part) do
        if got[j] and f ~= COUNTER and not texts[f] then
          fields[#fields + 1] = f
          texts[f] = got[j]
        end
      end
    end
  else
    fields, texts = read_lists(lkey)
  end
  for _, f in ipairs(fields) do
    local out, changed = {}, false
    for t in string.gmatch(texts[f], LISTED) do
      if gone[t] then changed = true else out[#out + 1] = t end
    end
    if #out == 0 then
      rcall('HDEL', lkey, f)
    elseif changed then
      rcall('HSET', lkey, f, table.concat(out, '\n'))
    end
  end
  -- The key goes with its last list (COUNTER alone is no list).
  local left = rcall('HLEN', lkey)
  if left == 0 or (left == 1 and rcall('HEXISTS', lkey, COUNTER) == 1) then
    rcall('DEL', lkey)
  end
  return n
end

local function qd_set_perm(topic, name, perm)
  local rq, wq, _, flag = qd_row(topic, name)
  if not rq then return false end
  rcall('HSET', k_topic_routes(topic), name, rq .. '\t' .. wq .. '\t' .. perm .. '\t' .. flag)
  rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
  touch_topic(topic)
  return true
end

local function qd_put_row(topic, name, rq, wq, perm, flag)
  local value = rq .. '\t' .. wq .. '\t' .. perm .. '\t' .. flag
  if rcall('HSET', k_topic_routes(topic), name, value) == 1 then list_added(name, {topic}) end
  rcall('HINCRBY', k_group(name), 'topicsEpoch', 1)
  rcall('SADD', k_topics(), topic)
  touch_topic(topic)
end

-- The removed group's lists become its cleanup record, without COUNTER (so the record goes with
-- its last list). A record left by an earlier removal of the same name is added to, field by
-- field, not replaced: its rows must go too.
local function qd_defer_cleanup(name)
  local lkey, ckey = k_group_topics(name), k_cleanup_topics(name)
  if rcall('EXISTS', ckey) == 0 then
    if rcall('EXISTS', lkey) == 1 then
      rcall('RENAME', lkey, ckey)
      rcall('HDEL', ckey, COUNTER)
    end
  else
    local fields, texts = read_lists(lkey)
    for _, f in ipairs(fields) do
      local old = rcall('HGET', ckey, f)
      rcall('HSET', ckey, f, old and (old .. '\n' .. texts[f]) or texts[f])
    end
    rcall('DEL', lkey)
  end
  rcall('SADD', k_cleanups(), name)
end

-- Up to `limit` listed topics of the cleanup record, a list at a time (a list longer than what
-- is left of `limit` is split: its first topics go, the rest is written back); the lists past
-- the limit are not read, so a big record costs each call O(limit), not O(record). Returns the
-- rows removed and what is left: the topics of the list split, and one per list not read (0
-- once the record is gone).
local function qd_drain(name, limit)
  local ckey = k_cleanup_topics(name)
  local budget, removed, left = tonumber(limit), 0, 0
  for _, f in ipairs(rcall('HKEYS', ckey)) do
    if budget <= 0 then
      left = left + 1
    else
      local rest = {}
      for t in string.gmatch(rcall('HGET', ckey, f), LISTED) do
        if budget > 0 then
          budget = budget - 1
          if drop_row(t, name) then removed = removed + 1 end
        else
          rest[#rest + 1] = t
        end
      end
      if #rest == 0 then
        rcall('HDEL', ckey, f)
      else
        rcall('HSET', ckey, f, table.concat(rest, '\n'))
        left = left + #rest
      end
    end
  end
  count_removed(name, removed)
  return removed, left
end

-- The group is gone and so are its rows (or they are in its cleanup record).
local function qd_forget_group(name) rcall('DEL', k_group_topics(name)) end

-- Every topic of group `name` may have changed: named one by one within changes.lua's budget,
-- past it (or in a store of another layout, whose lists this cannot read) as "*".
local function touch_group(name)
  if qd_fence(false) then
    touch_all()
    return
  end
  local fields, texts = read_lists(k_group_topics(name))
  local count = count_lists(fields, texts)
  if count > touch_group_budget then
    touch_all()
    return
  end
  touch_group_budget = touch_group_budget - count
  for _, f in ipairs(fields) do
    for t in string.gmatch(texts[f], LISTED) do touch_topic(t) end
  end
end
