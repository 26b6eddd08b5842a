--[[
  Input: KEYS[1], the namespace prefix; no ARGV[i] (the scripts name their arguments).
  Key builders (mirror of nsfleet/store/keys.py; a test checks the two agree).
  Every key is the namespace prefix KEYS[1] ("nsfleet:{<ns>}") plus a suffix, so every key a
  script touches carries the namespace hash tag and lives in KEYS[1]'s cluster slot.
]]
local P = KEYS[1]
local function k_broker(cluster, addr) return P .. ':broker:' .. cluster .. ':' .. addr end
local function k_group(name) return P .. ':group:' .. name end
-- k_queue(topic, name) is parts[1] .. topic .. parts[2] (a loop over a table builds each row's
-- key with one concatenation).
local function k_queue_parts(name) return P .. ':queue:', ':' .. name end
local function k_queue(topic, name) return P .. ':queue:' .. topic .. ':' .. name end
local function k_clusters() return P .. ':idx:clusters' end
local function k_cluster(cluster) return P .. ':idx:cluster:' .. cluster end
local function k_members(name) return P .. ':idx:members:' .. name end
local function k_topics() return P .. ':idx:topics' end
local function k_topic_prefix() return P .. ':idx:topic:' end
local function k_topic(topic) return k_topic_prefix() .. topic end
local function k_group_ids() return P .. ':idx:group-ids' end
local function k_group_names() return P .. ':idx:group-names' end
local function k_group_seq() return P .. ':idx:group-seq' end
local function k_broker_topics(name) return P .. ':idx:broker-topics:' .. name end
local function k_deadlines() return P .. ':idx:deadlines' end
local function k_reg(cluster, addr) return P .. ':idx:reg:' .. cluster .. ':' .. addr end
local function k_tables(cluster, addr) return P .. ':idx:tables:' .. cluster .. ':' .. addr end
local function k_filters(cluster, addr) return P .. ':idx:filters:' .. cluster .. ':' .. addr end
local function k_member_clusters(name) return P .. ':idx:member-clusters:' .. name end
local function k_route_groups() return P .. ':idx:route-groups' end
local function k_filtered() return P .. ':idx:filtered' end
local function k_conns(cluster, addr) return P .. ':idx:conns:' .. cluster .. ':' .. addr end
local function k_worker(worker) return P .. ':idx:worker:' .. worker end
local function k_mappings(topic) return P .. ':idx:mappings:' .. topic end
local function k_cleanups() return P .. ':idx:cleanups' end
local function k_cleanup(name) return P .. ':idx:cleanup:' .. name end
local function k_perm_clears() return P .. ':idx:perm-clears' end
-- The queue data's layout ("2": one hash per topic; absent or "1": one hash per row; "moving").
local function k_layout() return P .. ':layout' end
local function k_layout_move() return P .. ':layout-move' end
-- Layout 2: one hash per topic (brokerName -> "rq\twq\tperm\tflag"), and per group the topics it
-- serves as lists (registration chunk -> topics joined by "\n"; "+" and other fields: extras).
local function k_topic_routes_prefix() return P .. ':topic:' end
local function k_topic_routes(topic) return P .. ':topic:' .. topic end
local function k_group_topics(name) return P .. ':idx:group-topics:' .. name end
local function k_cleanup_topics(name) return P .. ':idx:cleanup-topics:' .. name end
local function k_seq() return P .. ':seq' end
local function k_rev() return P .. ':rev' end
local function k_changes() return P .. ':changes' end
local function k_ctl_set(name) return P .. ':ctl:set:' .. name end
local function k_ctl_replica(name, id) return P .. ':ctl:replica:' .. name .. ':' .. id end
local function k_ctl_live(name, id) return P .. ':ctl:live:' .. name .. ':' .. id end
local function k_ctl_conns(name, id) return P .. ':ctl:conns:' .. name .. ':' .. id end
local function k_ctl_sets() return P .. ':ctl:idx:sets' end
local function k_ctl_ids(name) return P .. ':ctl:idx:ids:' .. name end
local function k_ctl_deadlines() return P .. ':ctl:idx:deadlines' end
-- A member of P:ctl:idx:deadlines: a controller replica, by broker set and id.
local function replica_member(name, id) return name .. '\t' .. id end
-- A member of P:idx:deadlines and P:idx:filtered: a broker's live row, by cluster and address.
local function live_member(cluster, addr) return cluster .. '\t' .. addr end
