-- KEYS: 1 record (reservation + idempotency), 2 own bucket, 3 pool bucket, 4 borrow bucket,
--       5 in-flight zset, 6 the pool's set of in-flight zsets (what its sweep walks). All under the
--       pool's hash tag (admission.keys); no key is built here (Redis Cluster).
-- Reply: {answer, 0 new | 1 replay | 2 replay of a settled one, in flight after an admit (else 0),
--        ids of this scope's reservations past their TTL...}; a replay replies {answer, 1 | 2} only.
--        The caller settles those ids (expire.lua: their records are not this script's keys).
-- ARGV: 1 the revocation-epoch check (lib.lua: epoch_stale; reply {'E', epoch} when stale), 2 reservation id, 3 cost, 4 meta, then the scope's static values
--       (redis.py: _static): 5 class, 6 max concurrency, 7-8 own rate/depth, 9-10 pool rate/depth,
--       11-12 borrow rate/depth (0: may not borrow), 13 margin, 14 degraded '1'/'0', 15 reserved
--       floor, 16 ttl (whole seconds as an integer), 17 record ttl, 18-20 retry for CONCURRENCY_LIMIT, RECLAIMED,
--       PLATFORM_CAPACITY, 21 / 22 the record's static middle (ik … mo, see lib.lua) when the own /
--       borrow bucket pays.
-- With budgets or a request rate (issue 23; redis.py: _limit_args), KEYS 7 the request-rate
--       bucket, then per period its previous, current and next key (the caller's candidates around
--       its own clock: this script's clock picks one); ARGV 23 unit, 24 the estimate in that unit,
--       25-26 request rate/burst (depth 0: none), 27 number of periods, then per period its limit,
--       the current period's start and end and the next one's end.
-- Mirrors base.decide().
local stale = epoch_stale(ARGV[1])
if stale then return {'E', stale} end
local prev = redis.call('GET', KEYS[1])
if prev then
  -- A replay: 1, or 2 when the reservation is already settled (completed or expired).
  local head = string.sub(prev, 1, 5)
  if head == 'done\t' or head == 'expir' then return {answer_of(prev), 2} end
  return {answer_of(prev), 1}
end

local c, cls = tonumber(ARGV[3]), ARGV[5]
local now, now_str, sec, frac = clock()
local out = {'', 0, 0}

local function throttle(reason, ra, limit)
  local ans = 'T|' .. reason .. '|' .. ra
  if limit then ans = ans .. '|' .. limit end  -- which limit a QUOTA_EXCEEDED hit, when not the rate
  -- Replayed for its wait, at most an hour: a BUDGET_EXHAUSTED may advise days, and a record per
  -- refused request must not live that long (nor hide a budget raised meanwhile from a retry).
  redis.call('SET', KEYS[1], ans, 'EX', math.max(1, math.min(3600, tonumber(ra))))
  out[1] = ans
  return out
end

-- QUOTA_EXCEEDED advises the wait until the bucket(s) would have room.
local function quota(deficit, rate, limit)
  local w = 3600
  if rate > 0 then w = deficit / rate end
  return throttle('QUOTA_EXCEEDED', math.max(1, math.min(3600, math.ceil(w))), limit)
end

-- Expire on access: a reservation past its TTL no longer holds a slot (only live ones count), and
-- up to 16 of them are handed to the caller, which settles them at once (expire.lua), so a scope
-- with traffic needs no beat to free its slots; the pool's sweep settles any the caller did not.
local cap = tonumber(ARGV[6])
local live = redis.call('ZCOUNT', KEYS[5], '(' .. now_str, '+inf')
local due = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now_str, 'LIMIT', 0, 16)
for _, id in ipairs(due) do out[#out + 1] = id end
if live >= cap then return throttle('CONCURRENCY_LIMIT', ARGV[18]) end

-- Period budgets, then the request rate, then the token rate (mirrored by memory.py). A period
-- bucket holds what was spent under a key named for its period: it resets by key change at the
-- boundary and never refills in between.
local lim, units, charges, rq_l = ARGV[23], 0, {}, nil
if lim then
  units = tonumber(ARGV[24])
  local untl = 0
  for i = 1, tonumber(ARGV[27]) do
    local a, k = 27 + (i - 1) * 4, 8 + (i - 1) * 3
    local limit, s1, e1 = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local kend = ARGV[a + 3]
    if now < s1 then kend = ARGV[a + 2]
    elseif now < e1 then k = k + 1
    else k, kend = k + 2, ARGV[a + 4] end
    local used = tonumber(redis.call('GET', KEYS[k]) or '0')
    if used + units > limit and tonumber(kend) > untl then untl = tonumber(kend) end
    charges[#charges + 1] = {KEYS[k], ARGV[a + 1], kend, used}
  end
  if untl > 0 then return throttle('BUDGET_EXHAUSTED', math.max(1, math.ceil(untl - now))) end
  local rr, rdep = tonumber(ARGV[25]), tonumber(ARGV[26])
  if rdep > 0 then
    rq_l = level(KEYS[7], rr, rdep, now)
    if rq_l < 1 then return quota(1 - rq_l, rr, 'rps') end
  end
end

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

-- The budgets charged, for complete.lua: unit|units|key|limit|end per period (appended to the record).
local bud = ''
if lim then
  if rq_l then put(KEYS[7], rq_l - 1, now_str) end
  local parts = {ARGV[23], ARGV[24]}
  for _, ch in ipairs(charges) do
    -- Kept a day past its boundary (the statement may still read it), then gone.
    redis.call('SET', ch[1], num(ch[4] + units), 'EXAT', math.ceil(tonumber(ch[3])) + 86400)
    parts[#parts + 1] = ch[1] .. '|' .. ch[2] .. '|' .. ch[3]
  end
  bud = '\t' .. table.concat(parts, '|')
end

local expires
if string.find(ARGV[16], '^%d+$') then expires = (sec + ARGV[16]) .. frac  -- whole seconds: no float to format
else expires = num(now + tonumber(ARGV[16])) end
local ans = 'A|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. source .. '|' .. expires
redis.call('SET', KEYS[1], 'open\t' .. ans .. '\t' .. static .. '\t' .. ARGV[3] .. '\t' .. ARGV[4] .. bud,
  'EX', ARGV[17])
redis.call('SADD', KEYS[6], KEYS[5])  -- every non-empty in-flight zset is listed (a no-op once it is)
redis.call('ZADD', KEYS[5], expires, ARGV[2])
out[1] = ans
out[3] = live + 1  -- the scope's reservations in flight now: the live ones and this one
return out
