--[[
  The removal cascade shared by unregister, the expiry sweep and the fenced register path
  (RouteInfoManager.unRegisterBroker + cleanTopicByUnRegisterRequests, §3.4):
  live row, registration record, deadline and filter servers of (cluster, addr); every member entry
  of group `name` with that address (whatever its id); an emptied group leaves its cluster, an
  emptied cluster leaves the cluster set; the queue data of a removed group is deleted from every
  topic it served and topics left empty are dropped; a reduced group with enableActingMaster and
  no master loses the write perm on its queue data. Cost: O(topics of the group).
  Needs keys.lua and changes.lua; uses KEYS[1] through them and takes no ARGV[i] of its own.
]]
local function drop_queue(topic, name)
  rcall('DEL', k_queue(topic, name))
  rcall('SREM', k_topic(topic), name)
  rcall('SREM', k_broker_topics(name), topic)
  if rcall('SCARD', k_topic(topic)) == 0 then rcall('SREM', k_topics(), topic) end
  touch_topic(topic)
end

local function clear_write_perm(name)
  for _, topic in ipairs(rcall('SMEMBERS', k_broker_topics(name))) do
    local qk = k_queue(topic, name)
    local perm = tonumber(rcall('HGET', qk, 'perm'))
    if perm and perm % 4 >= 2 then
      rcall('HSET', qk, 'perm', perm - 2)
      touch_topic(topic)
    end
  end
end

-- Returns 1 when the group was removed, 0 when it was reduced or unknown.
local function remove_broker(cluster, addr, name)
  rcall('DEL', k_broker(cluster, addr), k_reg(cluster, addr))
  if rcall('DEL', k_filters(cluster, addr)) == 1 then touch_all() end
  rcall('ZREM', k_deadlines(), live_member(cluster, addr))
  if name == nil or name == '' then return 0 end
  local mkey = k_members(name)
  if rcall('EXISTS', k_group(name)) == 0 then return 0 end
  local flat = rcall('HGETALL', mkey)
  local remaining, has_master, removed = 0, false, false
  for i = 1, #flat, 2 do
    if flat[i + 1] == addr then
      rcall('HDEL', mkey, flat[i])
      removed = true
    else
      remaining = remaining + 1
      if flat[i] == '0' then has_master = true end
    end
  end
  local topics = rcall('SMEMBERS', k_broker_topics(name))
  if remaining == 0 then
    for _, topic in ipairs(topics) do drop_queue(topic, name) end
    rcall('DEL', k_group(name), mkey, k_broker_topics(name))
    rcall('SREM', k_cluster(cluster), name)
    if rcall('SCARD', k_cluster(cluster)) == 0 then rcall('SREM', k_clusters(), cluster) end
    touch_all()
    return 1
  end
  if removed then touch_topics(topics) end
  if not has_master and rcall('HGET', k_group(name), 'enableActingMaster') == 'true' then
    clear_write_perm(name)
  end
  return 0
end
