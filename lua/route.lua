--[[
  Read what one topic's route (RouteInfoManager.pickupTopicRouteData) is made of, in one round
  trip; nsfleet.store.table_reads assembles it. Redis is the one part of a fleet that does not
  scale out, so this script only reads, and leaves to the worker whatever the worker can do: the
  topic's queue data as stored (one HGETALL of the topic's hash in layout 2:
  includes/<layout>/queue_data.lua), what a route shows of each group from P:idx:route-groups in
  one HMGET (includes/group_routes.lua), and what tells live members from expired ones, so that
  a member whose deadline has passed is left out even before the sweep runs. Every member a
  route lists is a broker with a deadline in P:idx:deadlines (a group's members and their
  registration records come and go together), so while no deadline has passed, which the first
  of the zset says, every member is live and none is looked up; only while some broker is past
  its deadline and not yet swept, or some broker has filter servers, are the members' deadlines
  read, in one ZMSCORE. Sorting the groups, splitting rows, and working out which members are
  live, which groups have one and an acting master's write perm are the worker's (a route of
  many groups cost Redis more when this script did them: bench/route_cost.py). The filter
  server lists of live members are read only while some broker has one (P:idx:filtered).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RouteArgs):
    ARGV[1] arg_topic         topic
    ARGV[2] arg_order_conf    "1" = include orderTopicConf (orderMessageEnable)
  Output:
    {"none"} when no group serves the topic, else
    {"ok", orderTopicConf|"", mappings, rows, entries, now, first, deadlines, filters}
      mappings  = {bname1, TopicQueueMappingInfo JSON, ...} (static topics; {} for others)
      rows      = "bname1\n<readQueueNums>\t<writeQueueNums>\t<perm>\t<topicSysFlag>\nbname2..."
                  (one string): the groups serving the topic, in no order
      entries   = per group of rows, in its order, its P:idx:route-groups entry
                  "<cluster>\t<enableActingMaster>\t<zoneName>" .. ("\n<id>\t<addr>\t<member
                  cluster>")*, or "" when it has no group row (its rows still draining), joined
                  by "\r" (one string)
    rows and entries come as one string each: what Redis spends on a reply grows with its
    strings, and no name, address or zoneName holds a control character
    (nsfleet.domain.validation), so neither separator occurs within one.
      now       = the Redis clock, ms
      first     = the earliest deadline of any broker (ms), "" when there is none
      deadlines = {} when no broker is past its deadline (first >= now) and none has filter
                  servers: every member of the entries is live until `first` at least; else,
                  per member of the entries, in order, its deadline (ms; nil: none, not live)
      filters   = {} while no broker has filter servers; else, per member of the entries, in
                  order, its filter servers "f1<newline>f2" (nil: none, or not live)
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "hmget"
--- @include "group_routes"
--- @include "queue_data"

local MEMBER = '\n[^\t]*\t([^\t]*)\t([^\n]*)'

local topic = arg_topic
local moved = qd_fence(false)
if moved then return moved end
local rows = qd_topic_pairs(topic)
if #rows == 0 then return {'none'} end
local names = {}
for i = 1, #rows, 2 do names[#names + 1] = rows[i] end
local entries = hmget(k_route_groups(), names)
for n = 1, #names do
  -- A group without an entry: gone (its rows still draining), or written before the index.
  if not entries[n] then entries[n] = group_route(names[n]) or '' end
end
local now = now_ms()
local head = rcall('ZRANGE', k_deadlines(), 0, 0, 'WITHSCORES')
local first = head[2] or ''
local filtered = rcall('SCARD', k_filtered()) > 0
local deadlines, filters = {}, {}
if filtered or (head[2] and tonumber(head[2]) < now) then
  local members, keys = {}, {}
  for n = 1, #names do
    for addr, mcluster in string.gmatch(entries[n], MEMBER) do
      members[#members + 1] = live_member(mcluster, addr)
      keys[#keys + 1] = k_filters(mcluster, addr)
    end
  end
  deadlines = per_argument('ZMSCORE', k_deadlines(), members)
  if filtered then
    for i = 1, #members do
      local fs = {}
      if deadlines[i] and tonumber(deadlines[i]) >= now then
        fs = rcall('LRANGE', keys[i], 0, -1)
      end
      filters[i] = #fs > 0 and table.concat(fs, '\n')
    end
  end
end
local order_conf = arg_order_conf == '1' and rcall('HGET', KEYS[2], topic) or ''
return {'ok', order_conf, rcall('HGETALL', k_mappings(topic)), table.concat(rows, '\n'),
  table.concat(entries, '\r'), fmt(now), first, deadlines, filters}
