--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  The topic tables a broker's registrations wrote as they say (P:idx:tables:<cluster>:<addr>):
  the digests of whole tables and of the chunks of a split registration (5.x
  enableSplitRegistration: every chunk carries a new DataVersion and only part of the table), so
  an unchanged chunk under its new DataVersion skips the queue data as an unchanged whole table
  does (register_broker.lua). A recorded table holds while no queue row of the group changed
  since it was written: the set is valid while the registration record's topicsEpoch is the
  group's. Shared by register_broker.lua and register_commit.lua.
]]

-- A bound on the digests kept: chunk boundaries move when a broker adds or removes a topic, and
-- an old chunk's digest is dropped only when a row changes.
local TABLES_MAX = 256

-- After a registration that wrote its queue data: `kept` when the recorded tables still hold
-- (they held before it and it changed no queue row: a row it changed may belong to another
-- recorded table, as a topic can move between chunks), `synced` when it wrote every row of
-- table `digest` as the table says (a forced write by the group's writer).
local function record_table(cluster, addr, digest, kept, synced)
  local key = k_tables(cluster, addr)
  if not kept or (synced and rcall('SCARD', key) >= TABLES_MAX) then rcall('DEL', key) end
  if synced then rcall('SADD', key, digest) end
end
