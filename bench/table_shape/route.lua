--[[
  Candidate (issue 42, Java's table shape): what one topic's route is made of, in one round trip,
  lua/route.lua over the candidate layout: the topic's hash (every group serving it with its
  QueueData, one HGETALL, where today reads the route index, the group numbers' names and a
  queue row per group), the groups' P:idx:route-groups entries in one HMGET, a PTTL per member,
  and the filter servers of live members while some broker has some. Only reads; the worker
  puts the route together (nsfleet/store/table_reads.py), splitting each packed QueueData.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, RouteArgs):
    ARGV[1] arg_topic         topic
    ARGV[2] arg_order_conf    "1" = include orderTopicConf (orderMessageEnable)
  Output:
    {"none"} when no group serves the topic, else
    {"ok", orderTopicConf|"", mappings, names, rows, entries, ttls, filters}, as lua/route.lua
      but rows: per group one value "readQueueNums\twriteQueueNums\tperm\ttopicSysFlag"
]]
--- @include "rcall"
--- @include "keys"
--- @include "hmget"
--- @include "group_routes"
--- @include "table_keys"

local MEMBER = '\n[^\t]*\t([^\t]*)\t([^\n]*)'

local topic = arg_topic
local flat = rcall('HGETALL', k_topic_routes(topic))
if #flat == 0 then return {'none'} end
local names, value_of = {}, {}
for i = 1, #flat, 2 do
  names[#names + 1] = flat[i]
  value_of[flat[i]] = flat[i + 1]
end
table.sort(names)
local entries = hmget(k_route_groups(), names)
local filtered = rcall('SCARD', k_filtered()) > 0
local rows, ttls, filters = {}, {}, {}
for n, name in ipairs(names) do
  rows[n] = value_of[name]
  -- A group without an entry: gone (its rows still draining), or written before the index.
  local entry = entries[n] or group_route(name) or false
  entries[n] = entry
  if entry then
    for addr, mcluster in string.gmatch(entry, MEMBER) do
      local ttl = rcall('PTTL', k_broker(mcluster, addr))
      ttls[#ttls + 1] = ttl
      if filtered and ttl >= 0 then
        local fs = rcall('LRANGE', k_filters(mcluster, addr), 0, -1)
        if #fs > 0 then
          filters[#filters + 1] = addr
          filters[#filters + 1] = table.concat(fs, '\n')
        end
      end
    end
  end
end
local order_conf = arg_order_conf == '1' and rcall('HGET', KEYS[2], topic) or ''
return {'ok', order_conf, rcall('HGETALL', k_mappings(topic)), names, rows, entries, ttls,
  filters}
