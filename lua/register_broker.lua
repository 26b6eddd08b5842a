--[[
  Register a broker: the whole of RouteInfoManager.registerBroker, atomically. The "Step N"
  comments below number the parts of that method in Java's order; steps 6 and 7 (the two
  refusals) run first here, so that a refused call writes nothing of steps 1-5.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}" (every other key is built from it, includes/keys.lua)
    KEYS[2] P:idx:kvns                      KV namespaces
    KEYS[3] P:idx:kv:ORDER_TOPIC_CONFIG     the order-topic KV table returned to the broker
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterBrokerArgs):
    ARGV[1] arg_cluster         clusterName
    ARGV[2] arg_addr            brokerAddr
    ARGV[3] arg_name            brokerName
    ARGV[4] arg_id              brokerId
    ARGV[5] arg_ha_addr         haServerAddr ("" = none)
    ARGV[6] arg_zone            zoneName ("" = none)
    ARGV[7] arg_timeout_ms      heartbeatTimeoutMillis
    ARGV[8] arg_acting_master   enableActingMaster: "true" | "false" | "" (absent: an old-version
                                broker)
    ARGV[9] arg_dv_counter      dataVersion counter
    ARGV[10] arg_dv_timestamp   dataVersion timestamp
    ARGV[11] arg_state_version  dataVersion stateVersion
    ARGV[12] arg_filter_count   number of filter servers F, or -1 when the broker sent no list
                                (keep the stored one)
    ARGV[13] arg_topic_count    number of topics T in arg_topics (read by SLOWLOG and MONITOR
                                readers only)
    ARGV[14] arg_delete_absent  "1" = deleteTopicWithBrokerRegistration (drop this group's topics
                                absent from the table)
    ARGV[15] arg_want_kv        "1" = return the ORDER_TOPIC_CONFIG KV table
    ARGV[16] arg_topics_sent    how many topics the broker's table held as sent (the single-topic
                                guard counts those; topics nsfleet could not store are not among
                                the T)
    ARGV[17] arg_connection     the remoting connection registering ("<worker>:<n>"), or "" (HTTP)
    ARGV[18] arg_mapping_count  number of static-topic mappings M in the table (in every mode; in
                                "full" mode they are arg_mappings)
    ARGV[19] arg_digest         digest of the topic table, mappings and
                                deleteTopicWithBrokerRegistration as sent (of the chunk sent, for a
                                5.x split registration: includes/tables.lua keeps the digests of
                                the tables written, so an unchanged chunk costs O(1) like a whole
                                table)
    ARGV[20] arg_mode           "full": the whole registration in this call;
                                "probe": T is 0 and the topics are not sent; the registration is
                                applied only if it needs no per-topic work (see "Skipping the queue
                                data" below), else the script answers {"full"} having written
                                nothing;
                                "head": the first call of a registration too big for one call
                                (docs/architecture.md, "Bounded script time"): everything but the
                                queue data, which register_topics.lua then writes in chunks before
                                register_commit.lua records the table's digest; until then the
                                registration record carries "pending", so an interrupted
                                registration is redone in full by the next one
    ARGV[21] arg_row_budget     the most queue rows one call may write or remove (L): a fenced
                                newcomer's group cascade stops there (includes/cascade.lua); a
                                "full" call whose deleteTopicWithBrokerRegistration may remove more
                                answers {"chunk"} having written nothing
    ARGV[22] arg_topics         the T topics, a line each: topic, readQueueNums, writeQueueNums,
                                perm, topicSysFlag, tab-separated, the numbers as decimal strings
                                (includes/<layout>/queue_data.lua's TABLE_ROW)
    ARGV[23] arg_mappings       the M static-topic mappings, a JSON array of arrays (topic, bname,
                                TopicQueueMappingInfo JSON)
    ARGV[24..] arg_filters        the F filter server addresses (the last ARGV items)
  Output:
    {"ok", masterAddr|"", haServerAddr|"", generation, changed, kvFlag, k1, v1, k2, v2, ...}
      changed "1" when the registration changed the tables (a new broker, topic or value)
      kvFlag "1" when the ORDER_TOPIC_CONFIG namespace exists (then its pairs follow), else "0"
    {"fenced"}   an older stateVersion tried to take over an id (step 6, the stateVersion check
                 of RouteInfoManager.registerBroker): the newcomer's address is removed and
                 nothing else is written
    {"rejected"} single-topic registration from an id the group does not know (step 7, the
                 single-topic guard of RouteInfoManager.registerBroker); nothing is written
    {"full"}     (probe) the registration needs its topics: send it again with them
    {"chunk"}    (full) deleteTopicWithBrokerRegistration may remove more than L rows: register
                 in chunks ("head") instead; nothing is written
    {"head", generation, force, clearWrite, writer, changed, fresh, epoch}   (head) written but the
                 queue data: force "1" = write every topic (Java's isTopicConfigChanged for all
                 of them), clearWrite "1" = without the write perm, writer "1" = this broker
                 writes its group's queue data at all, fresh "1" = the group has no queue data
                 yet, epoch = the group's topicsEpoch now (the commit checks that only the
                 chunks changed it since)
    {"drain"}    the brokerName's previous group is still being removed (P:idx:cleanups): drain
                 it first; nothing is written
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"
--- @include "cascade"
--- @include "queue_data"
--- @include "register_reply"
--- @include "tables"
--- @include "group_routes"

local cluster, addr, name, id = arg_cluster, arg_addr, arg_name, arg_id
local moved = qd_fence(true)
if moved then return moved end
local ha, zone, timeout, acting_arg = arg_ha_addr, arg_zone, tonumber(arg_timeout_ms),
  arg_acting_master
local dv_counter, dv_ts, dv_state = arg_dv_counter, arg_dv_timestamp, arg_state_version
local nfilters, filters = tonumber(arg_filter_count), arg_filters
local delete_absent, want_kv = arg_delete_absent == '1', arg_want_kv == '1'
local topics_sent, conn = tonumber(arg_topics_sent), arg_connection
local digest, mode = arg_digest, arg_mode
local probe, head = mode == 'probe', mode == 'head'
local row_budget = tonumber(arg_row_budget)

if rcall('SISMEMBER', k_cleanups(), name) == 1 then return {'drain'} end

local gkey, mkey = k_group(name), k_members(name)
local members = {}
local flat = rcall('HGETALL', mkey)
for i = 1, #flat, 2 do members[flat[i]] = flat[i + 1] end
local old_addr = members[id]

-- Step 6, stateVersion fencing: checked before any write so a fenced call leaves no trace but
-- the removal of the newcomer (Java removes its live entry; by-address removal does the rest).
if old_addr and old_addr ~= addr then
  local old_state = rcall('HGET', k_broker(cluster, old_addr), 'stateVersion')
  if old_state and tonumber(old_state) > tonumber(dv_state) then
    remove_broker(new_budget(row_budget), cluster, addr, name)
    publish_changes()
    return {'fenced'}
  end
end
-- Step 7, single-topic guard (apache/rocketmq#4522). Java leaves steps 1-5 behind; nsfleet
-- writes nothing so no empty group is left (a documented difference).
if not old_addr and topics_sent == 1 then return {'rejected'} end

-- Skipping the queue data (step 10) when it would write nothing, so no per-topic key is read:
-- * The unchanged re-registration (what every broker sends every 30 s): the same DataVersion and
--   the same table as the registration that last wrote this broker's topics, whose queue rows
--   have not changed since (the group's topicsEpoch counts every queue row added, removed or
--   changed by any path). Java finds every topic present and writes nothing.
-- * The same table under a new DataVersion, when the registration that recorded it wrote every
--   row as the table says (a forced write: "synced") and no row has changed since. Java rewrites
--   every topic with the values it already has (createAndUpdateQueueData), which changes
--   nothing. Not for static-topic mappings (M > 0), which other groups' tables may also write,
--   nor while a write-perm clear of the group is under way.
-- * A broker that writes no queue data (a slave): Java reads none of its table.
-- Each needs the same member at the same id, the same role (writer or not), the same group meta
-- and a live row; a registration in chunks that has not committed never skips.
-- "1" when this broker writes its group's queue data (step 9: the master, or a prime slave: a
-- new-version broker with the lowest id and no master), given the group's members.
local function writer_flag(ids)
  if id == '0' then return '1' end
  if acting_arg == '' then return '0' end
  for mid in pairs(ids) do
    if tonumber(mid) < tonumber(id) then return '0' end
  end
  return '1'
end

local bkey = k_broker(cluster, addr)
local rkey = k_reg(cluster, addr)
-- What the registration record holds of the broker's last registration.
local r = rcall('HMGET', rkey, 'brokerName', 'tableDigest', 'topicsEpoch',
  'dataVersionCounter', 'dataVersionTimestamp', 'stateVersion', 'writer', 'synced', 'pending',
  'meta')
-- A registration in chunks that has not committed: whatever the DataVersion says, its table may
-- be half written.
local pending = r[9] ~= false
-- Every field of the registration but its DataVersion counter and timestamp and its table: the
-- same as the last registration's means steps 1-5, 8, 12 and the connection would rewrite what
-- is stored.
local reg_meta = table.concat({name, id, ha, zone, arg_timeout_ms, acting_arg, dv_state, conn,
  arg_filter_count, unpack(filters)}, '\n')
local skip = false      -- step 10 would write nothing
local synced = '0'      -- after this registration: the group's rows are what this table makes
-- The broker's recorded tables (includes/tables.lua) hold: same member, same role, and no queue
-- row of the group changed since its last registration.
local tables_ok = false
local epoch0 = nil
local group_same = false  -- the group meta is what this registration writes
if old_addr == addr and not pending and rcall('EXISTS', bkey) == 1 then
  local g = rcall('HMGET', gkey, 'topicsEpoch', 'enableActingMaster', 'zoneName')
  local acting_now = (acting_arg == 'true') and 'true' or 'false'
  local writer = writer_flag(members)
  group_same = g[2] == acting_now and (g[3] or '') == zone
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
      -- The same table, or one of the chunks of a split registration, as written before.
      skip, synced = true, '1'
    end
  end
end

-- The unchanged re-registration in a few commands (every chunk of a split round is one): step 10
-- skips and every other step would write what is stored, the connection included, so only the
-- live row, its deadline and the registration record's DataVersion move. Nothing is announced.
-- An "ok" probe that announced nothing lets the worker answer the rest of the round itself
-- (nsfleet/store/unchanged_chunks.py); register_data_version.lua then writes what this would.
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
if mode == 'full' and delete_absent and not skip
    and qd_group_topic_count(name) > row_budget then
  return {'chunk'}
end

-- Steps 1-3: cluster set, group row (brokerName is global), acting master and zone.
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
  touch_none()  -- the cluster tables changed, even for a group without topics
  touch_group(name)
end

-- Step 5, slave <-> master switch: one address appears once per group.
local members_changed = false
for mid, maddr in pairs(members) do
  if maddr == addr and mid ~= id then
    rcall('HDEL', mkey, mid)
    members[mid] = nil
    members_changed = true
  end
end
-- Step 8.
if old_addr ~= addr then
  rcall('HSET', mkey, id, addr)
  members[id] = addr
  members_changed = true
  if old_addr then rcall('HDEL', k_member_clusters(name), old_addr) end
end
if not old_addr then register_first = true end

-- Step 9: master, or a prime slave (new-version broker with the lowest id and no master).
local is_master = id == '0'
local is_prime_slave = false
if not is_master and acting_arg ~= '' then
  is_prime_slave = true
  for mid in pairs(members) do
    if tonumber(mid) < tonumber(id) then is_prime_slave = false end
  end
end

-- Step 10: queue data. isTopicConfigChanged = stored DataVersion missing or different, or the
-- topic lacks this group's queue data.
local was_live = rcall('EXISTS', bkey) == 1
local stored = rcall('HMGET', bkey, 'dataVersionCounter', 'dataVersionTimestamp', 'stateVersion')
local force = register_first or pending or stored[1] ~= dv_counter or stored[2] ~= dv_ts
  or stored[3] ~= dv_state
local clear_write = is_prime_slave and acting == 'true'
local fresh = not qd_group_has_rows(name)
local added_rows = 0
if (is_master or is_prime_slave) and not skip and not head then
  added_rows = write_queues(name, arg_topics, cjson.decode(arg_mappings), force, clear_write,
    fresh)
  if delete_absent then
    local incoming, absent = table_topics(arg_topics), {}
    for _, topic in ipairs(qd_group_topics(name)) do
      if not incoming[topic] then absent[#absent + 1] = topic end
    end
    qd_drop_absent(name, absent)
  end
end
if members_changed then touch_none() end
if members_changed or not was_live then touch_group(name) end

-- Step 11: the live row (replaced, as Java replaces BrokerLiveInfo), its TTL and deadline.
local now = now_ms()
local deadline = now + timeout
local generation = rcall('INCR', k_seq())
rcall('HSET', bkey, 'cluster', cluster, 'brokerAddr', addr, 'brokerName', name, 'brokerId', id,
  'haServerAddr', ha, 'lastUpdateTimestamp', fmt(now), 'heartbeatTimeoutMillis', fmt(timeout),
  'dataVersionCounter', dv_counter, 'dataVersionTimestamp', dv_ts, 'stateVersion', dv_state,
  'zoneName', zone)
rcall('PEXPIREAT', bkey, fmt(deadline))
-- The registration record outlives the row's TTL: it names the group for the sweep's cascade and
-- keeps the row's values, so a heartbeat arriving after the TTL but before the sweep can bring
-- the row back (Java keeps the broker until scanNotActiveBroker removes it).
local epoch1 = rcall('HGET', gkey, 'topicsEpoch') or '0'
-- A forced write (a first registration, a new DataVersion) leaves every row as the table says;
-- a registration in chunks is synced by its commit.
synced = (skip and synced) or ((force and not head and (is_master or is_prime_slave)) and '1')
  or '0'
rcall('HSET', rkey, 'brokerName', name, 'brokerId', id, 'generation', generation,
  'haServerAddr', ha, 'heartbeatTimeoutMillis', fmt(timeout), 'dataVersionCounter', dv_counter,
  'dataVersionTimestamp', dv_ts, 'stateVersion', dv_state, 'zoneName', zone,
  'tableDigest', head and '' or digest, 'topicsEpoch', epoch1,
  'writer', (is_master or is_prime_slave) and '1' or '0', 'synced', synced, 'meta', reg_meta)
if not skip then
  record_table(cluster, addr, digest,
    tables_ok and tonumber(epoch1) == tonumber(epoch0) + added_rows, synced == '1')
end
-- Committed by register_commit.lua once every chunk is written; until then a probe answers
-- "full" (no digest), a registration rewrites every topic and QUERY_DATA_VERSION says changed.
if head then
  rcall('HSET', rkey, 'pending', generation)
elseif pending then
  rcall('HDEL', rkey, 'pending')
end
rcall('ZADD', k_deadlines(), fmt(deadline), live_member(cluster, addr))
-- Members of one group may register under different cluster names: routes find each member's
-- live row under its own.
rcall('HSET', k_member_clusters(name), addr, cluster)
-- Liveness per broker, not per connection: remember every connection it registered over, and
-- forget those of workers that are gone. A registration over HTTP has no connection: from then
-- on only its deadline keeps the broker, so no earlier connection's close removes it.
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

-- Step 12: filter servers (an empty list removes them, no list keeps them).
if nfilters >= 0 then
  local fkey = k_filters(cluster, addr)
  local old = rcall('LRANGE', fkey, 0, -1)
  local same = #old == nfilters
  for i = 1, nfilters do if old[i] ~= filters[i] then same = false end end
  if not same then
    rcall('DEL', fkey)
    if nfilters > 0 then rcall('RPUSH', fkey, unpack(filters)) end
    touch_group(name)
  end
  if nfilters > 0 then
    rcall('SADD', k_filtered(), live_member(cluster, addr))
  else
    rcall('SREM', k_filtered(), live_member(cluster, addr))
  end
end
refresh_group_route(name)
local changed = publish_changes() and '1' or '0'
if head then
  return {'head', generation, force and '1' or '0', clear_write and '1' or '0',
    (is_master or is_prime_slave) and '1' or '0', changed, fresh and '1' or '0',
    rcall('HGET', gkey, 'topicsEpoch') or '0'}
end
return register_reply(cluster, name, id, generation, changed, want_kv)
