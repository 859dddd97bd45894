-- KEYS: 1 expiry zset. ARGV: 1 key prefix, 2 max reservations to settle in this call.
-- The periodic sweep: settles reservations past their TTL at their full estimate.
local now = now_s()
local out = {}
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', num(now), 'LIMIT', 0, tonumber(ARGV[2]))) do
  local m = expire_one(ARGV[1], KEYS[1], id)
  if m then out[#out + 1] = m end
end
return out
