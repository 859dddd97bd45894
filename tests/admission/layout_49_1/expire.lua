-- KEYS: 1 a scope's in-flight zset, 2 its pool's set of in-flight zsets, 3.. the records of the
-- reservations in ARGV, in the same order (all under the pool's hash tag: Redis Cluster).
-- ARGV: reservation ids. Settles each one still in the zset and past its TTL by Redis' clock at
-- its full estimate (debited in full at reserve): it leaves the zset and its record is marked
-- expired. Called with the ids a reserve handed back (reserve.lua) and by the pool's sweep. A zset
-- stays in the pool's set once listed, empty or not (issue 49.1: reserve.lua lists it with its scope's
-- first admission only, not with every one); KEYS 2 is unused since.
-- Reply: the metas of the reservations this call expired (whoever expires one reports it).
local now = clock()
local out = {}
for i, id in ipairs(ARGV) do
  local exp = redis.call('ZSCORE', KEYS[1], id)
  if exp and tonumber(exp) <= now then
    redis.call('ZREM', KEYS[1], id)
    local m = expire_record(KEYS[i + 2])
    if m then out[#out + 1] = m end
  end
end
return out
