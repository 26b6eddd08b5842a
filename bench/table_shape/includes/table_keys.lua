--- @include "keys"
--[[
  Input: KEYS[1] through keys.lua (lua/includes/keys.lua, the product's key builders, reused for
  every key the candidate layout does not change); no ARGV[i].
  The candidate layout's own keys (issue 42: Java's topicQueueTable shape), each built from the
  namespace prefix KEYS[1] so that it carries the namespace's {hash tag}:
    P:topic:<topic>                  hash   brokerName -> the group's QueueData, packed as
                                            "<readQueueNums>\t<writeQueueNums>\t<perm>\t
                                            <topicSysFlag>" (replaces P:queue:<topic>:<name>
                                            and P:idx:topic:<topic>)
    P:idx:group-topics:<name>        hash   registration chunk number ("1", "2", ...) -> that
                                            chunk's topics joined by "\n"; field "+" lists topics
                                            a chunk no longer names whose row stays (replaces the
                                            set P:idx:broker-topics:<name>; the removal cascade
                                            reads it)
    P:idx:cleanup-topics:<name>      hash   the same lists of a removed group still to delete
                                            (replaces the set P:idx:cleanup:<name>)
  A new name for each, so that none meets a key of today's layout with another type.
]]

local function k_topic_routes_prefix() return P .. ':topic:' end
local function k_topic_routes(topic) return P .. ':topic:' .. topic end
local function k_group_topics(name) return P .. ':idx:group-topics:' .. name end
local function k_cleanup_topics(name) return P .. ':idx:cleanup-topics:' .. name end
