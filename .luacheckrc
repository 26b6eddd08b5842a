-- luacheck over the scripts as Redis loads them, includes inlined (.ci/run writes them with
-- `python3 -P nsfleet/store/scripts.py DIR`): each file of lua/ alone calls functions that only
-- its includes define.
std = "lua51"
read_globals = {"redis", "KEYS", "ARGV", "cjson", "cmsgpack", "bit", "struct"}
max_line_length = 100
