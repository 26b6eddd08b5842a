--- @include "rcall"
--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua; no ARGV[i]: its functions take what they use as arguments.
  The fence of a registration's chunk, shared by register_topics.lua and
  register_topics_joint.lua: a chunk is written only while the broker's registration record
  still carries the generation its head answered and the group is there, so a chunk of a
  registration superseded by a newer one, or by the broker's removal, writes nothing.
]]
local function chunk_current(cluster, addr, name, generation)
  return rcall('HGET', k_reg(cluster, addr), 'generation') == generation
    and rcall('EXISTS', k_group(name)) == 1
end
