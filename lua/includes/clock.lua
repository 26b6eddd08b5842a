--- @include "rcall"
--[[
  Input: no KEYS[i] and no ARGV[i]: its functions take what they use as arguments.
  The server's clock, and numbers as Redis takes them.
]]

-- Server clock in epoch milliseconds: every worker sees the same clock.
local function now_ms()
  local t = rcall('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- An integral number as a decimal string (tostring writes big ones with an exponent).
local function fmt(n) return string.format('%.0f', n) end
