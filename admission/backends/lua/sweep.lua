-- KEYS: 1 the set of in-flight zsets. ARGV: 1 key prefix, 2 max reservations to look at in this call.
-- The periodic sweep: settles reservations past their TTL at their full estimate. A zset found
-- empty leaves the set (reserve lists it again with its next reservation; scripts do not interleave).
local _, now = clock()
local left = tonumber(ARGV[2])
local out = {}
for _, ik in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if left <= 0 then break end
  local ids = redis.call('ZRANGEBYSCORE', ik, '-inf', now, 'LIMIT', 0, left)
  left = left - #ids
  for _, id in ipairs(ids) do
    local m = expire_one(ARGV[1], ik, id)
    if m then out[#out + 1] = m end
  end
  if redis.call('ZCARD', ik) == 0 then redis.call('SREM', KEYS[1], ik) end
end
return out
