--[[
  Chunks of several registrations in one call (nsfleet/store/joint_chunks.py): register_topics.lua
  for each, in the case a storm of first registrations makes common, a fresh forced chunk of
  topics alone (arg_force and arg_fresh "1", no mappings, nothing absent). Their rows of one
  topic are written by one HSET in layout 2 (includes/topics/queue_data.lua, write_queues_joint;
  layout 1 writes each chunk in turn). Each chunk is fenced on its own, as register_topics.lua
  fences it: one whose registration was superseded writes nothing and answers "stale" while the
  others are written. The chunks are of distinct groups.
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, RegisterTopicsJointArgs):
    ARGV[1..] arg_chunks     every ARGV item, 6 per chunk: clusterName, brokerAddr, brokerName,
                             the generation its head answered, clear_write ("1" = clear the
                             write perm, as register_topics.lua), its topics (register_topics.lua's
                             arg_topics)
  Output:
    {"ok", status1, changed1, epochDelta1, added1, status2, ...}   four per chunk, in order:
                      "ok" and register_topics.lua's three figures, or "stale", "", "", ""
    {"layout", layout}   the store is in another layout than this assembly's
                         (includes/<layout>/queue_data.lua); nothing written
]]
--- @include "changes"
--- @include "chunk_fence"
--- @include "queue_data"

local moved = qd_fence(true)
if moved then return moved end
local given = arg_chunks
local live, live_at, seen = {}, {}, {}
for i = 1, #given, 6 do
  local cluster, addr, name, generation = given[i], given[i + 1], given[i + 2], given[i + 3]
  if seen[name] then return redis.error_reply('register_topics_joint: two chunks of ' .. name) end
  seen[name] = true
  if chunk_current(cluster, addr, name, generation) then
    live[#live + 1] = {name, given[i + 5], given[i + 4] == '1'}
    live_at[#live] = (i + 5) / 6
  end
end
local out = {'ok'}
for n = 1, #given / 6 do
  out[4 * n - 2], out[4 * n - 1], out[4 * n], out[4 * n + 1] = 'stale', '', '', ''
end
local figures = write_queues_joint(live)
local changed = publish_changes() and '1' or '0'
for j, f in ipairs(figures) do
  local at = 4 * live_at[j] - 2
  out[at], out[at + 1], out[at + 2], out[at + 3] = 'ok', changed, tostring(f[1]), tostring(f[2])
end
return out
