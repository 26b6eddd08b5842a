--[[
  Input: no KEYS[i] and no ARGV[i]: its functions take what they use as arguments.
  redis.call as a local: the scripts call it per queue row, and a local costs less than a field
  of a global table each time.
]]
local rcall = redis.call
