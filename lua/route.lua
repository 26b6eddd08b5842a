--[[
  Assemble one topic's route (RouteInfoManager.pickupTopicRouteData) in one round trip. Members
  whose live row has expired are left out even before the sweep runs, and the route is shaped as
  it will be once the sweep has run: a group with no live member is left out with its queue data,
  and a group with enableActingMaster that has lost its live master is shown without the write
  perm.
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

local topic = ARGV[1]
local names = rcall('SMEMBERS', k_topic(topic))
if #names == 0 then return {'none'} end
table.sort(names)
local reply = {'ok', '', -1, rcall('HGETALL', k_mappings(topic))}
local min_ttl = -1
for _, name in ipairs(names) do
  local q = rcall('HMGET', k_queue(topic, name), 'readQueueNums', 'writeQueueNums', 'perm',
    'topicSysFlag')
  local g = rcall('HMGET', k_group(name), 'cluster', 'enableActingMaster', 'zoneName')
  if q[1] and g[1] then
    local flat = rcall('HGETALL', k_members(name))
    local member_clusters = {}
    local mc = rcall('HGETALL', k_member_clusters(name))
    for i = 1, #mc, 2 do member_clusters[mc[i]] = mc[i + 1] end
    local addrs, filters, has_master = {}, {}, false
    for i = 1, #flat, 2 do
      local mcluster = member_clusters[flat[i + 1]] or g[1]
      local ttl = rcall('PTTL', k_broker(mcluster, flat[i + 1]))
      if ttl >= 0 then
        if min_ttl < 0 or ttl < min_ttl then min_ttl = ttl end
        addrs[#addrs + 1] = flat[i]
        addrs[#addrs + 1] = flat[i + 1]
        if flat[i] == '0' then has_master = true end
        local fs = rcall('LRANGE', k_filters(mcluster, flat[i + 1]), 0, -1)
        if #fs > 0 then
          filters[#filters + 1] = flat[i + 1]
          filters[#filters + 1] = table.concat(fs, '\n')
        end
      end
    end
    if #addrs > 0 then
      local perm = tonumber(q[3])
      if not has_master and g[2] == 'true' and writeable(perm) then perm = perm - 2 end
      reply[#reply + 1] = {name, g[1], g[2] or 'false', g[3] or '', q[1], q[2], perm, q[4],
        addrs, filters}
    end
  end
end
if #reply == 4 then return {'none'} end
if ARGV[2] == '1' then reply[2] = rcall('HGET', KEYS[2], topic) or '' end
reply[3] = min_ttl
return reply
