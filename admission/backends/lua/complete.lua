-- KEYS: 1 reservation record. ARGV: 1 reservation id, 2 prompt, 3 cached, 4 output, 5 status, 6 idem ttl,
-- 7 key prefix.
-- Refunds the unused estimate (or charges an overrun into debt) on the bucket that paid and on the
-- pool bucket, frees the concurrency slot. Settling twice returns the first result.
local rk, rid = KEYS[1], ARGV[1]
local raw = redis.call('GET', rk)
if not raw then return nil end
if string.sub(raw, 1, 5) == 'done\t' then return {string.sub(raw, 6), 1} end
local f = split(raw)
local now = now_s()
local est = tonumber(f[9])
local first = nil
if f[1] == 'open' then
  local exp = redis.call('ZSCORE', f[2], rid)
  -- Past its TTL: settled at the full estimate; whoever expires it reports it.
  if (not exp) or tonumber(exp) <= now then
    first = expire_one(ARGV[7], ARGV[7] .. 'exp', rid)
    f[1] = 'expired'
  end
end
if f[1] == 'expired' then
  local r = cjson.encode({reservation_id = rid, status = 'expired', reserved_wt = est, actual_wt = est,
    refunded_wt = 0})
  if first then return {r, 0, first} end
  return {r, 1}
end
local prompt, cached, output = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local actual = (prompt - cached) + tonumber(f[11]) * cached + tonumber(f[10]) * output
local delta = est - actual
local cd, pd = tonumber(f[5]), tonumber(f[8])
put(f[3], math.min(cd, level(f[3], tonumber(f[4]), cd, now) + delta), now)
put(f[6], math.min(pd, level(f[6], tonumber(f[7]), pd, now) + delta), now)
redis.call('ZREM', f[2], rid)
redis.call('ZREM', ARGV[7] .. 'exp', rid)
local result = cjson.encode({reservation_id = rid, status = ARGV[5], reserved_wt = est, actual_wt = actual,
  refunded_wt = delta})
redis.call('SET', rk, 'done\t' .. result, 'EX', tonumber(ARGV[6]))
return {result, 0, f[13]}
