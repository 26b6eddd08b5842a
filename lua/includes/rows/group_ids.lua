--- @include "rcall"
--- @include "keys"
--- @include "hmget"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  Group numbers. The route index P:idx:topic:<t> holds the groups serving a topic by number, not by
  brokerName, so Redis keeps it as an intset: in a registration storm a SADD of a number costs
  Redis less time than a SADD of a name, and the set less memory (bench/storm_floor.py). A group's
  number is negative ("-1", "-2", ...), assigned at its first queue row and never reused:
  P:idx:group-ids (brokerName -> number) and P:idx:group-names (number -> brokerName) keep it for
  good, so a group that comes back gets its number back. Sets written by builds before group
  numbers hold brokerNames: a member that P:idx:group-names does not know is read as a brokerName
  (docs/helm.md, upgrading).
]]

-- This call's lookups, by brokerName (false: the group has no number).
local group_id_of = {}

-- Group `name`'s number, or nil when it has none yet.
local function known_group_id(name)
  local id = group_id_of[name]
  if id == nil then
    id = rcall('HGET', k_group_ids(), name) or false
    group_id_of[name] = id
  end
  return id or nil
end

-- Group `name`'s number, assigned now when it has none.
local function group_id(name)
  local id = known_group_id(name)
  if not id then
    id = '-' .. rcall('INCR', k_group_seq())
    rcall('HSET', k_group_ids(), name, id)
    rcall('HSET', k_group_names(), id, name)
    group_id_of[name] = id
  end
  return id
end

-- The brokerNames of `members` (a topic's set: numbers, or names written before them), in order.
local function group_names_of(members)
  local names = hmget(k_group_names(), members)
  for i = 1, #members do names[i] = names[i] or members[i] end
  return names
end

-- Remove group `name` from topic `topic`'s set: its number, and its brokerName should a build
-- before group numbers have written it there.
local function unindex_group(topic, name)
  local id = known_group_id(name)
  if id then
    rcall('SREM', k_topic(topic), id, name)
  else
    rcall('SREM', k_topic(topic), name)
  end
end
