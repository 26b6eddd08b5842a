--[[
  Assemble one topic's route (RouteInfoManager.pickupTopicRouteData) in one round trip. Members
  whose live row has expired are left out even before the sweep runs, and the route is shaped as
  it will be once the sweep has run: a group with no live member is left out with its queue data,
  and a group with enableActingMaster that has lost its live master is shown without the write
  perm. What the route shows of every group comes from P:idx:route-groups in one HMGET
  (includes/group_routes.lua), and the filter-server lists are read only while some broker has
  one (P:idx:filtered): per group, a route costs its queue row and a PTTL per member.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    KEYS[2] P:idx:kv:ORDER_TOPIC_CONFIG
    ARGV[1] topic
    ARGV[2] "1" = include orderTopicConf (orderMessageEnable)
  Output:
    {"none"} when there is no queue data or no live group (TOPIC_NOT_EXIST), else
    {"ok", orderTopicConf|"", ttl, mappings, group1, group2, ...}
      ttl   ms until the first listed member's deadline
      mappings = {bname1, TopicQueueMappingInfo JSON, ...} (static topics; {} for others)
      group = {brokerName, cluster, enableActingMaster, zoneName, readQueueNums, writeQueueNums,
               perm, topicSysFlag, {id1, addr1, ...}, {addr, "f1<newline>f2", ...}}
]]
--- @include "keys"
--- @include "group_routes"

-- HMGET takes at most this many fields at a time (Lua's unpack limit).
local BATCH = 1000

local topic = ARGV[1]
local names = rcall('SMEMBERS', k_topic(topic))
if #names == 0 then return {'none'} end
table.sort(names)
local entries = {}
for from = 1, #names, BATCH do
  local got = rcall('HMGET', k_route_groups(), unpack(names, from, math.min(from + BATCH - 1,
    #names)))
  for i = 1, #got do entries[from + i - 1] = got[i] end
end
local filtered = rcall('SCARD', k_filtered()) > 0
local reply = {'ok', '', -1, rcall('HGETALL', k_mappings(topic))}
local min_ttl = -1
for n, name in ipairs(names) do
  local q = rcall('HMGET', k_queue(topic, name), 'readQueueNums', 'writeQueueNums', 'perm',
    'topicSysFlag')
  -- A group without an entry: gone (its rows still draining), or written before the index.
  local entry = q[1] and (entries[n] or group_route(name))
  if entry then
    local cluster, acting, zone = string.match(entry, '^([^\t]*)\t([^\t]*)\t([^\n]*)')
    local addrs, filters, has_master = {}, {}, false
    for id, addr, mcluster in string.gmatch(entry, '\n([^\t]*)\t([^\t]*)\t([^\n]*)') do
      local ttl = rcall('PTTL', k_broker(mcluster, addr))
      if ttl >= 0 then
        if min_ttl < 0 or ttl < min_ttl then min_ttl = ttl end
        addrs[#addrs + 1] = id
        addrs[#addrs + 1] = addr
        if id == '0' then has_master = true end
        if filtered then
          local fs = rcall('LRANGE', k_filters(mcluster, addr), 0, -1)
          if #fs > 0 then
            filters[#filters + 1] = addr
            filters[#filters + 1] = table.concat(fs, '\n')
          end
        end
      end
    end
    if #addrs > 0 then
      local perm = tonumber(q[3])
      if not has_master and acting == 'true' and writeable(perm) then perm = perm - 2 end
      reply[#reply + 1] = {name, cluster, acting, zone, q[1], q[2], perm, q[4], addrs, filters}
    end
  end
end
if #reply == 4 then return {'none'} end
if ARGV[2] == '1' then reply[2] = rcall('HGET', KEYS[2], topic) or '' end
reply[3] = min_ttl
return reply
