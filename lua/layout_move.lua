--[[
  One step of the move of the queue data from layout 1 (one hash per row) to layout 2 (one hash
  per topic), driven by nsfleet/store/layout_move.py (docs/queue-data-layouts.md). While the
  store is "moving" no queue data is written (the scripts that write it wait) and reads go on
  from layout 1's keys, which stay whole until the move is done: no route is missing at any
  moment. P:layout-move is the move's record: owner (a worker id), started (epoch ms), state
  ("copying", with a lease: PEXPIRE, renewed by every step; "cleaning" once P:layout is "2",
  without one: deleting layout 1's keys is idempotent and any worker may finish it). A worker
  whose lease lapsed is no longer the owner: its next step answers "lost", and whoever begins
  again copies everything again (a copy writes the same values: nothing changes meanwhile).
  Input:
    KEYS[1] namespace prefix "nsfleet:{<ns>}"
    ARGV[i], each read as the local arg_<name> (nsfleet/store/scripts.py, LayoutMoveArgs):
    ARGV[1] arg_op        "begin", "renew", "copy" or "finish"
    ARGV[2] arg_owner     the worker id moving the store
    ARGV[3] arg_lease_ms  the lease of a copying move (PEXPIRE of P:layout-move)
    ARGV[4] arg_name      copy: the brokerName whose topics are copied ("" otherwise)
    ARGV[5] arg_page      copy: the page's number within the group, from "1" ("" otherwise)
    ARGV[6..] arg_topics  copy: the page's topics, the rest of ARGV (none otherwise)
  Ops:
    begin   P:layout absent or "1" with P:idx:cleanups and P:idx:perm-clears empty (removed
            groups still draining and write perms still being cleared are layout 1's work: the
            sweep finishes them first), or "moving" without a live record (its owner died) or
            with one of arg_owner: P:layout "moving", a new record, state "copying". The caller
            has checked that no worker of an older build is alive (its presence value is not
            "2"): one that starts later would write layout 1 rows, which no check here stops.
    renew   the lease, again (between copies that take long to prepare).
    copy    for each topic with a row of the group: P:topic:<t> <name> = "rq\twq\tperm\tflag";
            then the topics that had a row as the group's list "m<page>"
            (P:idx:group-topics:<name>); page "1" first drops the group's lists a copy begun
            before wrote. Renews the lease.
    finish  P:layout "2", the record "cleaning" (persisted), every route announced as changed
            (the workers' caches refill from layout 2).
  Output:
    {"ok", n}   begin: the layout found ("1" or "moving": taken over); renew: 0; copy: the
                page's rows copied; finish: the change's revision (P:rev)
    {"held", why}   begin only: nothing written; why "2" (moved already), "owner" (another
                    worker's live move) or "drains" (P:idx:cleanups or P:idx:perm-clears)
    {"lost"}   renew, copy, finish: arg_owner's move is not the one under way (its lease lapsed
               and another took over, or it is done); nothing written
]]
--- @include "rcall"
--- @include "keys"
--- @include "clock"
--- @include "changes"

local op, owner = arg_op, arg_owner
local mk = k_layout_move()

if op == 'begin' then
  local layout = rcall('GET', k_layout()) or '1'
  if layout == '2' then return {'held', '2'} end
  if layout == 'moving' then
    local current = rcall('HGET', mk, 'owner')
    if current and current ~= owner then return {'held', 'owner'} end
  elseif rcall('EXISTS', k_cleanups()) == 1 or rcall('EXISTS', k_perm_clears()) == 1 then
    return {'held', 'drains'}
  end
  rcall('SET', k_layout(), 'moving')
  rcall('DEL', mk)
  rcall('HSET', mk, 'owner', owner, 'started', now_ms(), 'state', 'copying')
  rcall('PEXPIRE', mk, arg_lease_ms)
  return {'ok', layout}
end

local record = rcall('HMGET', mk, 'owner', 'state')
if record[1] ~= owner or record[2] ~= 'copying' then return {'lost'} end

if op == 'renew' then
  rcall('PEXPIRE', mk, arg_lease_ms)
  return {'ok', 0}
end

if op == 'copy' then
  local name, topics = arg_name, arg_topics
  local qa, qb = k_queue_parts(name)
  local tprefix = k_topic_routes_prefix()
  local listed = {}
  for i = 1, #topics do
    local topic = topics[i]
    local q = rcall('HMGET', qa .. topic .. qb, 'readQueueNums', 'writeQueueNums', 'perm',
      'topicSysFlag')
    if q[1] then
      rcall('HSET', tprefix .. topic, name,
        q[1] .. '\t' .. (q[2] or '') .. '\t' .. (q[3] or '') .. '\t' .. (q[4] or ''))
      listed[#listed + 1] = topic
    end
  end
  local lkey = k_group_topics(name)
  if arg_page == '1' then rcall('DEL', lkey) end
  if #listed > 0 then rcall('HSET', lkey, 'm' .. arg_page, table.concat(listed, '\n')) end
  rcall('PEXPIRE', mk, arg_lease_ms)
  return {'ok', #listed}
end

if op ~= 'finish' then return redis.error_reply('layout_move: unknown op ' .. op) end
rcall('SET', k_layout(), '2')
rcall('HSET', mk, 'state', 'cleaning')
rcall('PERSIST', mk)
touch_all()
return {'ok', publish_changes()}
