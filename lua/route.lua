--[[
  Read what one topic's route (RouteInfoManager.pickupTopicRouteData) is made of, in one round
  trip; nsfleet.store.table_reads assembles it. Redis is the one part of a fleet that does not
  scale out, so this script only reads: the topic's queue data, a row per group serving it (one
  HGETALL of the topic's hash in layout 2: includes/<layout>/queue_data.lua), what a route
  shows of each group from P:idx:route-groups in one HMGET (includes/group_routes.lua), and each
  member's PTTL, so that a member whose live row has expired is left out even before the sweep
  runs. Which members are live, which groups have one, the min TTL and an acting master's write
  perm are worked out by the worker (a route of many groups cost Redis more when this script
  built it: bench/route_cost.py). The filter server lists of live members are read only
  while some broker has one (P:idx:filtered).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RouteArgs):
    ARGV[1] arg_topic         topic
    ARGV[2] arg_order_conf    "1" = include orderTopicConf (orderMessageEnable)
  Output:
    {"none"} when no group serves the topic, else
    {"ok", orderTopicConf|"", mappings, names, rows, entries, ttls, filters}
      mappings = {bname1, TopicQueueMappingInfo JSON, ...} (static topics; {} for others)
      names    = the groups serving the topic, sorted
      rows     = per group, its queue row: readQueueNums, writeQueueNums, perm, topicSysFlag
                 (four nils when the row is gone: the group's rows still draining)
      entries  = per group, its P:idx:route-groups entry "<cluster>\t<enableActingMaster>\t
                 <zoneName>" .. ("\n<id>\t<addr>\t<member cluster>")*, or nil when its row is
                 gone or it has no group row
      ttls     = per member of those entries, in order, the PTTL of its live row (< 0: not live)
      filters  = {addr1, "f1<newline>f2", ...}: the filter servers of live members that have some
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "hmget"
--- @include "group_routes"
--- @include "queue_data"

local MEMBER = '\n[^\t]*\t([^\t]*)\t([^\n]*)'

local topic = arg_topic
local moved = qd_fence(false)
if moved then return moved end
local names, values = qd_topic_rows(topic)
if #names == 0 then return {'none'} end
local entries = hmget(k_route_groups(), names)
local filtered = rcall('SCARD', k_filtered()) > 0
local rows, ttls, filters = {}, {}, {}
for n, name in ipairs(names) do
  local q = values[n]
  rows[#rows + 1] = q[1]
  rows[#rows + 1] = q[2]
  rows[#rows + 1] = q[3]
  rows[#rows + 1] = q[4]
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
