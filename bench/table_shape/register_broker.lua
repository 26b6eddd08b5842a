--[[
  Candidate (issue 42, Java's table shape): the first call of a registration,
  lua/register_broker.lua's "probe" and "head" modes over the candidate layout
  (includes/table_keys.lua). Every step but the queue data is today's, on today's keys: the
  cluster set, the group row, the members, stateVersion fencing, the single-topic guard, the live
  row, its deadline and the registration record, the connections, the filter servers and the route
  index of groups. The queue data follows in chunks (register_topics.lua), then
  register_commit.lua. The unchanged re-registration skips the queue data as today's does (the
  registration record's digest, DataVersion, synced flag and the group's topicsEpoch, and the
  broker's recorded tables, lua/includes/tables.lua) and then costs the same few commands.
  Not mirrored: the "full" mode (a small table written in this call; its per-row work is
  register_topics.lua's) and the acting-master write-perm clear of the fencing cascade.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}" (every other key is built from it)
    KEYS[2] P:idx:kvns                      KV namespaces
    KEYS[3] P:idx:kv:ORDER_TOPIC_CONFIG     the order-topic KV table returned to the broker
    ARGV[i], each read as the local arg_<name> (bench/table_shape.py, RegisterBrokerArgs):
    ARGV[1] arg_cluster         clusterName
    ARGV[2] arg_addr            brokerAddr
    ARGV[3] arg_name            brokerName
    ARGV[4] arg_id              brokerId
    ARGV[5] arg_ha_addr         haServerAddr ("" = none)
    ARGV[6] arg_zone            zoneName ("" = none)
    ARGV[7] arg_timeout_ms      heartbeatTimeoutMillis
    ARGV[8] arg_acting_master   enableActingMaster: "true" | "false" | "" (an old-version broker)
    ARGV[9] arg_dv_counter      dataVersion counter
    ARGV[10] arg_dv_timestamp   dataVersion timestamp
    ARGV[11] arg_state_version  dataVersion stateVersion
    ARGV[12] arg_filter_count   number of filter servers F, or -1 when the broker sent no list
    ARGV[13] arg_want_kv        "1" = return the ORDER_TOPIC_CONFIG KV table
    ARGV[14] arg_topics_sent    how many topics the broker's table held as sent
    ARGV[15] arg_connection     the remoting connection registering ("<worker>:<n>"), or ""
    ARGV[16] arg_mapping_count  number of static-topic mappings in the table
    ARGV[17] arg_digest         digest of the topic table, mappings and
                                deleteTopicWithBrokerRegistration as sent
    ARGV[18] arg_mode           "probe": applied only when it needs no per-topic work, else
                                {"full"} having written nothing; "head": everything but the queue
                                data, the record then "pending" until register_commit.lua
    ARGV[19] arg_row_budget     the most queue rows a fenced newcomer's group cascade removes
    ARGV[20..] arg_filters      the F filter server addresses (the last ARGV items)
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, changed, kvFlag, k1, v1, ...}  (probe)
    {"head", generation, force, clearWrite, writer, changed, fresh, epoch}            (head)
    {"full"} (probe: send the table), {"fenced"}, {"rejected"}, {"drain"}: as
    lua/register_broker.lua
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"
--- @include "table_keys"
--- @include "topic_cascade"
--- @include "register_reply"
--- @include "tables"
--- @include "group_routes"

local cluster, addr, name, id = arg_cluster, arg_addr, arg_name, arg_id
local ha, zone, timeout, acting_arg = arg_ha_addr, arg_zone, tonumber(arg_timeout_ms),
  arg_acting_master
local dv_counter, dv_ts, dv_state = arg_dv_counter, arg_dv_timestamp, arg_state_version
local nfilters, filters = tonumber(arg_filter_count), arg_filters
local want_kv, topics_sent, conn = arg_want_kv == '1', tonumber(arg_topics_sent), arg_connection
local digest, probe = arg_digest, arg_mode == 'probe'

if rcall('SISMEMBER', k_cleanups(), name) == 1 then return {'drain'} end

local gkey, mkey = k_group(name), k_members(name)
local members = {}
local flat = rcall('HGETALL', mkey)
for i = 1, #flat, 2 do members[flat[i]] = flat[i + 1] end
local old_addr = members[id]

-- Step 6, stateVersion fencing, and step 7, the single-topic guard, as today.
if old_addr and old_addr ~= addr then
  local old_state = rcall('HGET', k_broker(cluster, old_addr), 'stateVersion')
  if old_state and tonumber(old_state) > tonumber(dv_state) then
    remove_broker(new_budget(tonumber(arg_row_budget)), cluster, addr, name)
    publish_changes()
    return {'fenced'}
  end
end
if not old_addr and topics_sent == 1 then return {'rejected'} end

local function writer_flag(ids)
  if id == '0' then return '1' end
  if acting_arg == '' then return '0' end
  for mid in pairs(ids) do
    if tonumber(mid) < tonumber(id) then return '0' end
  end
  return '1'
end

-- Skipping the queue data when it would write nothing: today's rules, word for word.
local bkey, rkey = k_broker(cluster, addr), k_reg(cluster, addr)
local r = rcall('HMGET', rkey, 'brokerName', 'tableDigest', 'topicsEpoch',
  'dataVersionCounter', 'dataVersionTimestamp', 'stateVersion', 'writer', 'synced', 'pending',
  'meta')
local pending = r[9] ~= false
local reg_meta = table.concat({name, id, ha, zone, arg_timeout_ms, acting_arg, dv_state, conn,
  arg_filter_count, unpack(filters)}, '\n')
local skip, synced, tables_ok, epoch0, group_same = false, '0', false, nil, false
if old_addr == addr and not pending and rcall('EXISTS', bkey) == 1 then
  local g = rcall('HMGET', gkey, 'topicsEpoch', 'enableActingMaster', 'zoneName')
  local writer = writer_flag(members)
  group_same = g[2] == ((acting_arg == 'true') and 'true' or 'false') and (g[3] or '') == zone
  local same_role = r[1] == name and r[7] == writer and group_same
  for mid, maddr in pairs(members) do
    if maddr == addr and mid ~= id then same_role = false end
  end
  epoch0 = g[1] or '0'
  tables_ok = same_role and r[3] == epoch0
  if same_role and writer == '0' then
    skip = true
  elseif tables_ok then
    if r[2] == digest and r[4] == dv_counter and r[5] == dv_ts and r[6] == dv_state then
      skip, synced = true, r[8] or '0'
    elseif tonumber(arg_mapping_count) == 0 and rcall('HEXISTS', k_perm_clears(), name) == 0
        and ((r[2] == digest and r[8] == '1')
          or rcall('SISMEMBER', k_tables(cluster, addr), digest) == 1) then
      skip, synced = true, '1'
    end
  end
end

-- The unchanged re-registration in a few commands, as today.
if skip and group_same and r[10] == reg_meta
    and (conn == '' or rcall('SISMEMBER', k_conns(cluster, addr), conn) == 1) then
  local now = now_ms()
  local deadline = now + timeout
  local generation = rcall('INCR', k_seq())
  rcall('HSET', bkey, 'lastUpdateTimestamp', fmt(now), 'dataVersionCounter', dv_counter,
    'dataVersionTimestamp', dv_ts)
  rcall('PEXPIREAT', bkey, fmt(deadline))
  rcall('HSET', rkey, 'generation', generation, 'dataVersionCounter', dv_counter,
    'dataVersionTimestamp', dv_ts, 'tableDigest', digest, 'synced', synced)
  rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
  if rcall('HGET', k_member_clusters(name), addr) ~= cluster then
    rcall('HSET', k_member_clusters(name), addr, cluster)
    refresh_group_route(name)
  else
    ensure_group_route(name)
  end
  return register_reply(cluster, name, id, generation, '0', want_kv)
end
if probe and not skip then return {'full'} end

-- Steps 1-3, 5, 8 and 9 as today.
rcall('SADD', k_clusters(), cluster)
rcall('SADD', k_cluster(cluster), name)
local register_first = rcall('EXISTS', gkey) == 0
local acting = (acting_arg == 'true') and 'true' or 'false'
local meta = rcall('HMGET', gkey, 'enableActingMaster', 'zoneName')
if register_first then
  rcall('HSET', gkey, 'cluster', cluster, 'brokerName', name)
  touch_all()
end
if meta[1] ~= acting or (meta[2] or '') ~= zone then
  rcall('HSET', gkey, 'enableActingMaster', acting, 'zoneName', zone)
  touch_none()
  touch_group_topics(name)
end
local members_changed = false
for mid, maddr in pairs(members) do
  if maddr == addr and mid ~= id then
    rcall('HDEL', mkey, mid)
    members[mid] = nil
    members_changed = true
  end
end
if old_addr ~= addr then
  rcall('HSET', mkey, id, addr)
  members[id] = addr
  members_changed = true
  if old_addr then rcall('HDEL', k_member_clusters(name), old_addr) end
end
if not old_addr then register_first = true end
local is_master = id == '0'
local is_prime_slave = false
if not is_master and acting_arg ~= '' then
  is_prime_slave = true
  for mid in pairs(members) do
    if tonumber(mid) < tonumber(id) then is_prime_slave = false end
  end
end
local writer = is_master or is_prime_slave

-- Step 10 is the chunks'; what they need to know.
local was_live = rcall('EXISTS', bkey) == 1
local stored = rcall('HMGET', bkey, 'dataVersionCounter', 'dataVersionTimestamp', 'stateVersion')
local force = register_first or pending or stored[1] ~= dv_counter or stored[2] ~= dv_ts
  or stored[3] ~= dv_state
local clear_write = is_prime_slave and acting == 'true'
local fresh = rcall('EXISTS', k_group_topics(name)) == 0
if members_changed then touch_none() end
if members_changed or not was_live then touch_group_topics(name) end

-- Step 11: the live row, its TTL and deadline, the registration record ("pending").
local now = now_ms()
local deadline = now + timeout
local generation = rcall('INCR', k_seq())
rcall('HSET', bkey, 'cluster', cluster, 'brokerAddr', addr, 'brokerName', name, 'brokerId', id,
  'haServerAddr', ha, 'lastUpdateTimestamp', fmt(now), 'heartbeatTimeoutMillis', fmt(timeout),
  'dataVersionCounter', dv_counter, 'dataVersionTimestamp', dv_ts, 'stateVersion', dv_state,
  'zoneName', zone)
rcall('PEXPIREAT', bkey, fmt(deadline))
local epoch1 = rcall('HGET', gkey, 'topicsEpoch') or '0'
rcall('HSET', rkey, 'brokerName', name, 'brokerId', id, 'generation', generation,
  'haServerAddr', ha, 'heartbeatTimeoutMillis', fmt(timeout), 'dataVersionCounter', dv_counter,
  'dataVersionTimestamp', dv_ts, 'stateVersion', dv_state, 'zoneName', zone,
  'tableDigest', '', 'topicsEpoch', epoch1, 'writer', writer and '1' or '0', 'synced', '0',
  'meta', reg_meta)
record_table(cluster, addr, digest, tables_ok and tonumber(epoch1) == tonumber(epoch0), false)
rcall('HSET', rkey, 'pending', generation)
rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
rcall('HSET', k_member_clusters(name), addr, cluster)
if conn == '' then
  rcall('DEL', k_conns(cluster, addr))
else
  local ckey = k_conns(cluster, addr)
  for _, c in ipairs(rcall('SMEMBERS', ckey)) do
    if rcall('EXISTS', k_worker(string.match(c, '^(.*):[^:]*$') or c)) == 0 then
      rcall('SREM', ckey, c)
    end
  end
  rcall('SADD', ckey, conn)
end

-- Step 12: filter servers, as today.
if nfilters >= 0 then
  local fkey = k_filters(cluster, addr)
  local old = rcall('LRANGE', fkey, 0, -1)
  local same = #old == nfilters
  for i = 1, nfilters do if old[i] ~= filters[i] then same = false end end
  if not same then
    rcall('DEL', fkey)
    if nfilters > 0 then rcall('RPUSH', fkey, unpack(filters)) end
    touch_group_topics(name)
  end
  if nfilters > 0 then
    rcall('SADD', k_filtered(), live_member(cluster, addr))
  else
    rcall('SREM', k_filtered(), live_member(cluster, addr))
  end
end
refresh_group_route(name)
local changed = publish_changes() and '1' or '0'
return {'head', generation, force and '1' or '0', clear_write and '1' or '0',
  writer and '1' or '0', changed, fresh and '1' or '0', rcall('HGET', gkey, 'topicsEpoch') or '0'}
