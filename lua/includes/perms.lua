--[[
  Input: no KEYS[i] and no ARGV[i]: its functions take what they use as arguments.
  Queue permissions (org.apache.rocketmq.common.constant.PermName).
]]

-- PermName.isWriteable (perm & PERM_WRITE) for any Java int, PERM_PRIORITY and negative values
-- included: floored division and modulo follow two's complement bit by bit.
local function writeable(perm) return math.floor(perm / 2) % 2 == 1 end
