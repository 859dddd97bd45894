-- KEYS: 1 idempotency, 2 own bucket, 3 pool bucket, 4 borrow bucket, 5 in-flight zset, 6 expiry zset
-- ARGV: see admission/backends/redis.py (_reserve_args); mirrors base.decide().
local prefix, rid = ARGV[1], ARGV[2]
local maxc, cls = tonumber(ARGV[3]), ARGV[4]
local own_r, own_d = tonumber(ARGV[5]), tonumber(ARGV[6])
local pool_r, pool_d = tonumber(ARGV[7]), tonumber(ARGV[8])
local bor_r, bor_d = tonumber(ARGV[9]), tonumber(ARGV[10])
local c, margin = tonumber(ARGV[11]), tonumber(ARGV[12])
local degraded, floor = ARGV[13] == '1', tonumber(ARGV[14])
local ttl, idem_ttl = tonumber(ARGV[15]), tonumber(ARGV[16])
local meta, wo, wc = ARGV[17], ARGV[18], ARGV[19]
local retry = {CONCURRENCY_LIMIT = tonumber(ARGV[20]), RECLAIMED = tonumber(ARGV[21]),
               PLATFORM_CAPACITY = tonumber(ARGV[22])}
local can_borrow = bor_d > 0

local prev = redis.call('GET', KEYS[1])
if prev then return {prev, 1} end

local now = now_s()
local out = {'', 0}

local function throttle(reason, wait)
  local ra = retry[reason]
  if reason == 'QUOTA_EXCEEDED' then ra = math.max(1, math.min(3600, math.ceil(wait))) end
  local ans = 'T|' .. reason .. '|' .. ra
  redis.call('SET', KEYS[1], ans, 'EX', math.max(1, ra))
  out[1] = ans
  return out
end

local function wait(deficit, rate) if rate > 0 then return deficit / rate end return 3600 end

if redis.call('ZCARD', KEYS[5]) >= maxc then
  -- At the cap, first settle this scope's reservations past their TTL (the sweep does the rest).
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', num(now))) do
    local m = expire_one(prefix, KEYS[6], id)
    if m then out[#out + 1] = m end
  end
  if redis.call('ZCARD', KEYS[5]) >= maxc then return throttle('CONCURRENCY_LIMIT', 0) end
end

local own_l = level(KEYS[2], own_r, own_d, now)
local pool_l = level(KEYS[3], pool_r, pool_d, now)
local bor_l = 0
if can_borrow then bor_l = level(KEYS[4], bor_r, bor_d, now) end
local pool_ok = pool_l - c >= margin
local bor_reason = 'RECLAIMED'
if degraded then bor_reason = 'PLATFORM_CAPACITY' end

local source
if cls == 'reserved' then
  if degraded and pool_l - c < floor then return throttle('PLATFORM_CAPACITY', 0) end
  if own_l < c then return throttle('QUOTA_EXCEEDED', wait(c - own_l, own_r)) end
  source = 'entitlement'
elseif own_l >= c then
  if cls == 'shared' then
    if degraded and pool_l - c < 0 then return throttle('PLATFORM_CAPACITY', 0) end
  elseif not pool_ok then
    return throttle(bor_reason, 0)
  end
  source = 'entitlement'
else
  if not can_borrow then return throttle('QUOTA_EXCEEDED', wait(c - own_l, own_r)) end
  if bor_l < c then return throttle('QUOTA_EXCEEDED', wait(c - math.max(own_l, bor_l), own_r + bor_r)) end
  if not pool_ok then return throttle(bor_reason, 0) end
  source = 'borrowed'
end

local cb, cr, cd = KEYS[2], own_r, own_d
if source == 'borrowed' then
  cb, cr, cd = KEYS[4], bor_r, bor_d
  put(KEYS[4], bor_l - c, now)
  put(KEYS[2], own_l, now)
else
  put(KEYS[2], own_l - c, now)
end
put(KEYS[3], pool_l - c, now)

local expires = now + ttl
redis.call('SET', prefix .. 'res:' .. rid, join({'open', KEYS[5], cb, num(cr), num(cd), KEYS[3], num(pool_r),
  num(pool_d), num(c), wo, wc, source, meta}), 'EX', math.ceil(ttl) + idem_ttl)
redis.call('ZADD', KEYS[5], num(expires), rid)
redis.call('ZADD', KEYS[6], num(expires), rid)
local ans = 'A|' .. rid .. '|' .. num(c) .. '|' .. source .. '|' .. num(expires)
redis.call('SET', KEYS[1], ans, 'EX', math.ceil(ttl) + idem_ttl)
out[1] = ans
return out
