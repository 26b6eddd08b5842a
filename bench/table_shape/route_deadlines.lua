--[[
  Candidate (issue 42, Java's table shape), a variant of route.lua: each member's liveness read
  as its deadline, every member's in one ZMSCORE of P:idx:deadlines, instead of a PTTL per member.
  The deadline zset's score and the live row's PEXPIREAT are written together, with the same
  value, by every script that moves either (register_broker.lua, heartbeat.lua,
  register_data_version.lua), so a member is live while its score is ahead of the server clock,
  as while its PTTL is >= 0. Not tied to the layout: today's route.lua could do the same.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, RouteArgs):
    ARGV[1] arg_topic         topic
    ARGV[2] arg_order_conf    "1" = include orderTopicConf (orderMessageEnable)
  Output:
    {"none"} when no group serves the topic, else
    {"ok", orderTopicConf|"", mappings, names, rows, entries, ttls, filters}, as route.lua but
      ttls: per member of the entries, in order, its time left in ms (< 0: not live)
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
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
local rows, members, addrs = {}, {}, {}
for n, name in ipairs(names) do
  rows[n] = value_of[name]
  local entry = entries[n] or group_route(name) or false
  entries[n] = entry
  if entry then
    for addr, mcluster in string.gmatch(entry, MEMBER) do
      members[#members + 1] = live_member(mcluster, addr)
      addrs[#addrs + 1] = addr
    end
  end
end
local ttls, filters = {}, {}
if #members > 0 then
  local now = now_ms()
  local scores = rcall('ZMSCORE', k_deadlines(), unpack(members))
  for i = 1, #members do
    ttls[i] = scores[i] and (tonumber(scores[i]) - now) or -2
  end
  if rcall('SCARD', k_filtered()) > 0 then
    for i = 1, #members do
      local tab = string.find(members[i], '\t', 1, true)
      local fs = ttls[i] >= 0
        and rcall('LRANGE', k_filters(string.sub(members[i], 1, tab - 1), addrs[i]), 0, -1) or {}
      if #fs > 0 then
        filters[#filters + 1] = addrs[i]
        filters[#filters + 1] = table.concat(fs, '\n')
      end
    end
  end
end
local order_conf = arg_order_conf == '1' and rcall('HGET', KEYS[2], topic) or ''
return {'ok', order_conf, rcall('HGETALL', k_mappings(topic)), names, rows, entries, ttls,
  filters}
