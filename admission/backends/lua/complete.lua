-- KEYS: 1 reservation hash. ARGV: 1 reservation id, 2 prompt, 3 cached, 4 output, 5 status, 6 idem ttl,
-- 7 key prefix.
-- Refunds the unused estimate (or charges an overrun into debt) on the bucket that paid and on the
-- pool bucket, frees the concurrency slot. Settling twice returns the first result.
local rk, rid = KEYS[1], ARGV[1]
local h = redis.call('HMGET', rk, 'st', 'result', 'est', 'meta')
if not h[1] then return nil end
if h[1] == 'done' then return {h[2], 1} end
local f = redis.call('HMGET', rk, 'ik', 'xk', 'cb', 'cr', 'cd', 'pk', 'pr', 'pd', 'wo', 'wc')
local now = now_s()
local first = nil
if h[1] == 'open' then
  local exp = redis.call('ZSCORE', f[1], rid)
  -- Past its TTL: settled at the full estimate; whoever expires it reports it.
  if (not exp) or tonumber(exp) <= now then first = expire_one(ARGV[7], f[2], rid); h[1] = 'expired' end
end
if h[1] == 'expired' then
  local r = cjson.encode({reservation_id = rid, status = 'expired', reserved_wt = tonumber(h[3]),
    actual_wt = tonumber(h[3]), refunded_wt = 0})
  if first then return {r, 0, first} end
  return {r, 1}
end
local prompt, cached, output = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local actual = (prompt - cached) + tonumber(f[10]) * cached + tonumber(f[9]) * output
local est = tonumber(h[3])
local delta = est - actual
local cd, pd = tonumber(f[5]), tonumber(f[8])
put(f[3], math.min(cd, level(f[3], tonumber(f[4]), cd, now) + delta), now)
put(f[6], math.min(pd, level(f[6], tonumber(f[7]), pd, now) + delta), now)
redis.call('ZREM', f[1], rid)
redis.call('ZREM', f[2], rid)
local result = cjson.encode({reservation_id = rid, status = ARGV[5], reserved_wt = est, actual_wt = actual,
  refunded_wt = delta})
redis.call('HSET', rk, 'st', 'done', 'result', result)
redis.call('EXPIRE', rk, tonumber(ARGV[6]))
return {result, 0, h[4]}
