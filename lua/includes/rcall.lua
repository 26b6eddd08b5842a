--[[
  redis.call as a local: the scripts call it per queue row, and a local costs less than a field
  of a global table each time.
  Takes no keys and no arguments.
]]
local rcall = redis.call
