--- @include "rcall"
--[[
  Input: no KEYS[i] and no ARGV[i]: its functions take what they use as arguments.
  Commands that answer one value per argument (HMGET, ZMSCORE), for any number of arguments.
]]

-- `command` of `key` for any number of `args`, one value each, in calls of at most 1000 (Lua's
-- unpack limit); up to 1000, the reply itself, not copied.
local function per_argument(command, key, args)
  if #args > 0 and #args <= 1000 then return rcall(command, key, unpack(args)) end
  local values = {}
  for from = 1, #args, 1000 do
    local got = rcall(command, key, unpack(args, from, math.min(from + 999, #args)))
    for i = 1, #got do values[from + i - 1] = got[i] end
  end
  return values
end

-- HMGET of `key` for any number of `fields`.
local function hmget(key, fields) return per_argument('HMGET', key, fields) end
