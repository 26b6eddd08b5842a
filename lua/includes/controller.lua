--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua's builders; no ARGV[i]: its functions take what they use.
  A broker set's controller state (ReplicasInfoManager's SyncStateInfo and BrokerReplicaInfo, in
  P:ctl:set:<name> and P:ctl:replica:<name>:<id>), replica liveness (P:ctl:idx:deadlines, kept
  by controller_heartbeat.lua) and the election (DefaultElectPolicy with electMaster's rules).
]]

-- "1;2" as a list of ids (strings), ascending; "" as an empty list.
local function id_list(text)
  local ids = {}
  for id in string.gmatch(text or '', '[^;]+') do ids[#ids + 1] = id end
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
  return ids
end

local function id_text(ids)
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
  return table.concat(ids, ';')
end

-- Every replica id of the set, ascending.
local function set_ids(name)
  local ids = rcall('SMEMBERS', k_ctl_ids(name))
  table.sort(ids, function(a, b) return tonumber(a) < tonumber(b) end)
  return ids
end

-- Alive: a controller heartbeat whose deadline is still ahead (isBrokerActive).
local function replica_alive(name, id, now)
  local deadline = rcall('ZSCORE', k_ctl_deadlines(), replica_member(name, id))
  return deadline ~= false and tonumber(deadline) >= now
end

-- DefaultElectPolicy.tryElect over ``ids``: the old master while alive (unless another is
-- preferred), else the preferred id if alive, else the best alive one by heartbeat epoch
-- (higher first), maxOffset (higher first), electionPriority (lower first), then lower id.
local function try_elect(name, ids, now, old, prefer)
  local alive = {}
  for _, id in ipairs(ids) do
    if replica_alive(name, id, now) then alive[#alive + 1] = id end
  end
  if #alive == 0 then return nil end
  for _, id in ipairs(alive) do
    if id == old and (prefer == nil or prefer == old) then return old end
  end
  if prefer ~= nil then
    for _, id in ipairs(alive) do
      if id == prefer then return prefer end
    end
    return nil
  end
  local best, best_rank
  for _, id in ipairs(alive) do
    local h = rcall('HMGET', k_ctl_live(name, id), 'epoch', 'maxOffset', 'electionPriority')
    local rank = {tonumber(h[1]) or 0, tonumber(h[2]) or 0, tonumber(h[3]) or 0, tonumber(id)}
    local better = best == nil or rank[1] > best_rank[1]
      or (rank[1] == best_rank[1] and (rank[2] > best_rank[2]
        or (rank[2] == best_rank[2] and (rank[3] < best_rank[3]
          or (rank[3] == best_rank[3] and rank[4] < best_rank[4])))))
    if better then best, best_rank = id, rank end
  end
  return best
end

-- The set's replicas: a flat list id, address, "1" when alive else "0" (ids ascending).
local function replica_rows(name, now)
  local out = {}
  for _, id in ipairs(set_ids(name)) do
    out[#out + 1] = id
    out[#out + 1] = rcall('HGET', k_ctl_replica(name, id), 'brokerAddress') or ''
    out[#out + 1] = replica_alive(name, id, now) and '1' or '0'
  end
  return out
end

--[[
  ReplicasInfoManager.electMaster then its ElectMasterEvent, for broker set ``name``:
  ``requester`` the broker id asking (nil: the controller's own trigger), ``designate`` the
  admin's designated election of ``requester``, ``unclean`` enableElectUncleanMaster.
  Returns one of
    {"ok", masterId, masterAddress, masterEpoch, syncStateSetEpoch, syncStateSet, cluster,
     replica rows...}   a new master (epochs +1, the SyncStateSet is the master alone)
    {"still", masterId, masterAddress, masterEpoch, syncStateSetEpoch, syncStateSet, cluster,
     replica rows...}   the old master is still the choice: nothing written (2011)
    {"unknown"}         no such broker set (2010)
    {"none"}            the controller's trigger found no candidate: the master is cleared and
                        masterEpoch +1, the SyncStateSet kept (2004)
    {"failed"}          a broker's or the admin's request found none: nothing written (2012)
]]
local function elect(name, requester, designate, unclean, now)
  local skey = k_ctl_set(name)
  local s = rcall('HMGET', skey, 'masterBrokerId', 'masterEpoch', 'syncStateSet',
    'syncStateSetEpoch', 'clusterName')
  if not s[2] then return {'unknown'} end
  local old = s[1] ~= '' and s[1] or nil
  local sss = id_list(s[3])
  local new
  if tonumber(s[2]) == 0 then new = requester end  -- the set's first election
  if new == nil or new == '-1' then
    local prefer = designate and requester or nil
    new = try_elect(name, sss, now, old, prefer)
    if new == nil and unclean then
      new = try_elect(name, set_ids(name), now, old, prefer)
    end
  end
  if new ~= nil and new == old then
    local addr = rcall('HGET', k_ctl_replica(name, old), 'brokerAddress') or ''
    local out = {'still', old, addr, s[2], s[4], s[3], s[5]}
    for _, v in ipairs(replica_rows(name, now)) do out[#out + 1] = v end
    return out
  end
  if new == nil then
    if requester == nil or requester == '-1' then
      rcall('HSET', skey, 'masterBrokerId', '', 'masterAddress', '',
        'masterEpoch', tostring(tonumber(s[2]) + 1))
      return {'none'}
    end
    return {'failed'}
  end
  local addr = rcall('HGET', k_ctl_replica(name, new), 'brokerAddress') or ''
  local master_epoch, sss_epoch = tostring(tonumber(s[2]) + 1), tostring(tonumber(s[4]) + 1)
  rcall('HSET', skey, 'masterBrokerId', new, 'masterAddress', addr, 'masterEpoch', master_epoch,
    'syncStateSet', new, 'syncStateSetEpoch', sss_epoch)
  local out = {'ok', new, addr, master_epoch, sss_epoch, new, s[5]}
  for _, v in ipairs(replica_rows(name, now)) do out[#out + 1] = v end
  return out
end
