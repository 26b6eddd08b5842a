--- @include "rcall"
--[[
  Input: no KEYS[i] and no ARGV[i]: its functions take what they use as arguments.
  HMGET of any number of fields.
]]

-- HMGET of `key` for any number of `fields`, in calls of at most 1000 (Lua's unpack limit).
local function hmget(key, fields)
  local values = {}
  for from = 1, #fields, 1000 do
    local got = rcall('HMGET', key, unpack(fields, from, math.min(from + 999, #fields)))
    for i = 1, #got do values[from + i - 1] = got[i] end
  end
  return values
end
