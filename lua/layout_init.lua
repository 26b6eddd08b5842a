--[[
  The queue data's layout of the store, decided once when the first worker of this build meets
  it (docs/queue-data-layouts.md): P:layout as it stands; absent, a store that holds queue data
  (or removed groups still draining) was written before layout 2 and stays in layout 1 until it
  moves (store/layout_move.py); an empty one starts in layout 2, unless a worker of an older
  build is alive (it knows layout 1 only: the store stays in layout 1 and moves once it is gone).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, LayoutInitArgs):
    ARGV[1] arg_old_workers   "1" when a worker of an older build is alive (its presence says
                              "1")
  Output:
    {"ok", layout}   "1", "moving" or "2"
]]
--- @include "rcall"
--- @include "keys"

local layout = rcall('GET', k_layout())
if layout then return {'ok', layout} end
if arg_old_workers == '1' or rcall('EXISTS', k_topics(), k_cleanups()) > 0 then
  return {'ok', '1'}
end
rcall('SET', k_layout(), '2')
return {'ok', '2'}
