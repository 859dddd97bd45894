-- KEYS: 1 record (reservation + idempotency), 2 own bucket, 3 pool bucket, 4 borrow bucket,
--       5 in-flight zset, 6 the set of in-flight zsets (what the sweep walks).
-- Reply: {answer, 0 new | 1 replay | 2 replay of a settled one, expired metas...}.
-- ARGV: 1 key prefix, 2 reservation id, 3 cost, 4 meta, then the scope's static values
--       (redis.py: _static): 5 class, 6 max concurrency, 7-8 own rate/depth, 9-10 pool rate/depth,
--       11-12 borrow rate/depth (0: may not borrow), 13 margin, 14 degraded '1'/'0', 15 reserved
--       floor, 16 ttl (whole seconds as an integer), 17 record ttl, 18-20 retry for CONCURRENCY_LIMIT, RECLAIMED,
--       PLATFORM_CAPACITY, 21 / 22 the record's static middle (ik … mo, see lib.lua) when the own /
--       borrow bucket pays.
-- Mirrors base.decide().
local prev = redis.call('GET', KEYS[1])
if prev then
  -- A replay: 1, or 2 when the reservation is already settled (completed or expired).
  local head = string.sub(prev, 1, 5)
  if head == 'done\t' or head == 'expir' then return {answer_of(prev), 2} end
  return {answer_of(prev), 1}
end

local c, cls = tonumber(ARGV[3]), ARGV[5]
local now, now_str, sec, frac = clock()
local out = {'', 0}

local function throttle(reason, ra)
  local ans = 'T|' .. reason .. '|' .. ra
  redis.call('SET', KEYS[1], ans, 'EX', math.max(1, tonumber(ra)))
  out[1] = ans
  return out
end

-- QUOTA_EXCEEDED advises the wait until the bucket(s) would have room.
local function quota(deficit, rate)
  local w = 3600
  if rate > 0 then w = deficit / rate end
  return throttle('QUOTA_EXCEEDED', math.max(1, math.min(3600, math.ceil(w))))
end

-- Expire on access: every reserve first settles up to 16 of this scope's reservations past their
-- TTL (at the cap, all of them), so a scope with traffic needs no beat to free its slots.
local cap = tonumber(ARGV[6])
local n = redis.call('ZCARD', KEYS[5])
local due
if n >= cap then due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now_str)
else due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now_str, 'LIMIT', 0, 16) end
for _, id in ipairs(due) do
  local m = expire_one(ARGV[1], KEYS[5], id)  -- always leaves the zset
  if m then out[#out + 1] = m end
end
if n - #due >= cap then return throttle('CONCURRENCY_LIMIT', ARGV[18]) end

local own_r, own_d = tonumber(ARGV[7]), tonumber(ARGV[8])
local pool_r, pool_d = tonumber(ARGV[9]), tonumber(ARGV[10])
local own_l = level(KEYS[2], own_r, own_d, now)
local pool_l = level(KEYS[3], pool_r, pool_d, now)
local degraded = ARGV[14] == '1'
local bor_reason, bor_retry = 'RECLAIMED', ARGV[19]
if degraded then bor_reason, bor_retry = 'PLATFORM_CAPACITY', ARGV[20] end
local pool_ok = pool_l - c >= tonumber(ARGV[13])

local source, bor_l
if cls == 'reserved' then
  if degraded and pool_l - c < tonumber(ARGV[15]) then return throttle('PLATFORM_CAPACITY', ARGV[20]) end
  if own_l < c then return quota(c - own_l, own_r) end
  source = 'entitlement'
elseif own_l >= c then
  if cls == 'shared' then
    if degraded and pool_l - c < 0 then return throttle('PLATFORM_CAPACITY', ARGV[20]) end
  elseif not pool_ok then
    return throttle(bor_reason, bor_retry)
  end
  source = 'entitlement'
else
  local bor_r, bor_d = tonumber(ARGV[11]), tonumber(ARGV[12])
  if bor_d <= 0 then return quota(c - own_l, own_r) end
  bor_l = level(KEYS[4], bor_r, bor_d, now)  -- read only now: decide() needs it only here
  if bor_l < c then return quota(c - math.max(own_l, bor_l), own_r + bor_r) end
  if not pool_ok then return throttle(bor_reason, bor_retry) end
  source = 'borrowed'
end

local static = ARGV[21]
if source == 'borrowed' then
  static = ARGV[22]
  put(KEYS[4], bor_l - c, now_str)
  put(KEYS[2], own_l, now_str)
else
  put(KEYS[2], own_l - c, now_str)
end
put(KEYS[3], bounded(pool_l - c, pool_d), now_str)  -- lenders may take the pool into debt, one depth at most

local expires
if string.find(ARGV[16], '^%d+$') then expires = (sec + ARGV[16]) .. frac  -- whole seconds: no float to format
else expires = num(now + tonumber(ARGV[16])) end
local ans = 'A|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. source .. '|' .. expires
redis.call('SET', KEYS[1], 'open\t' .. ans .. '\t' .. static .. '\t' .. ARGV[3] .. '\t' .. ARGV[4],
  'EX', ARGV[17])
redis.call('SADD', KEYS[6], KEYS[5])  -- every non-empty in-flight zset is listed (a no-op once it is)
redis.call('ZADD', KEYS[5], expires, ARGV[2])
out[1] = ans
return out
