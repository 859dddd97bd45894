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
-- Lending and fair share (issue 36.3; base.Share): KEYS 7 the pool's lend bucket, 8 the pool's
--       fair-share table (a hash: member → 'borrowed|at|weight|active until'); ARGV 23-24 lend
--       rate/depth (depth 0: no lender limits lending), 25 weight (0: this scope does not borrow),
--       26 this scope's member name, 27 the window (s), 28 how long a borrowed attempt keeps it active (s),
--       29 '1' when its own admissions charge the lend bucket (base.Lends; KEYS 7, ARGV 23-24), 30-31
--       its keep-back bucket's rate/depth (depth 0: no lending limit; else it is the LAST key).
-- With budgets or a request rate (issue 23; redis.py: _limit_args), KEYS 9 the request-rate
--       bucket, then per period its previous, current and next key (the caller's candidates around
--       its own clock: this script's clock picks one); ARGV 32 unit, 33 the estimate in that unit,
--       34-35 request rate/burst (depth 0: none), 36 number of periods, then per period its limit,
--       the current period's start and end and the next one's end.
-- The last ARGV is '1' when the caller wants the remaining quota (docs/contract.md §5: reply 4, see quota()
--       below), '0' when not; it follows the budgets' values when there are any.
-- Mirrors base.decide().
local stale = epoch_stale(ARGV[1])
if stale then return {'E', stale} end
-- The last ARGV's first character: '1' for the remaining quota; its second '1' when a spill may follow
-- (issue 36.1, base.ReserveOp.overflow).
local want_q = string.sub(ARGV[#ARGV], 1, 1) == '1'
local spill_ok = string.sub(ARGV[#ARGV], 2, 2) == '1'
local lim = nil
if #ARGV > 32 then lim = ARGV[32] end
local prev = redis.call('GET', KEYS[1])

-- The period buckets in force by Redis' clock: {key, limit, end, used} per period (the caller
-- passed the previous, current and next period's keys and boundaries).
local function periods_now(now)
  local got = {}
  for i = 1, tonumber(ARGV[36]) do
    local a, k = 36 + (i - 1) * 4, 10 + (i - 1) * 3
    local s1, e1 = tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
    local kend = ARGV[a + 3]
    if now < s1 then kend = ARGV[a + 2]
    elseif now < e1 then k = k + 1
    else k, kend = k + 2, ARGV[a + 4] end
    got[#got + 1] = {KEYS[k], ARGV[a + 1], kend, tonumber(redis.call('GET', KEYS[k]) or '0')}
  end
  return got
end

-- The header values (base.whole, to_full: the same rule in Python for the memory store), formatted
-- here, where the interpreter is hot: Python only splits them (a Python step after the round trip runs
-- with cold caches and cost 3-4 times its warm time, bench/quota_headers.py). '%d' (0.26 µs) where the
-- value is below 2^53, as '%.0f' (0.5 µs) would write the same digits; '%d' truncates, which is floor
-- for x > 0.
local function whole(x)
  if not (x > 0) then return '0' end
  if x < 9007199254740992 then return string.format('%d', x) end
  return string.format('%.0f', math.floor(x))  -- beyond 2^53 (a long would not hold every such value)
end

-- Seconds until the bucket is full, rounded up to the millisecond, no trailing zeros ('never': no
-- refill within base.NEVER_S).
local function to_full(l, rate, depth)
  if l >= depth then return '0' end
  if rate <= 0 then return 'never' end
  local wait = (depth - l) / rate
  if not (wait < 1e12) then return 'never' end  -- base.NEVER_S (an infinite wait included)
  local ms = math.ceil(wait * 1000 - 1e-6)
  if ms <= 0 then return '0' end
  local frac = ms % 1000
  local w = (ms - frac) / 1000
  if frac == 0 then return string.format('%d', w) end
  if frac % 100 == 0 then return string.format('%d.%d', w, frac / 100) end
  if frac % 10 == 0 then return string.format('%d.%02d', w, frac / 10) end
  return string.format('%d.%03d', w, frac)
end

-- The remaining quota after this call (docs/contract.md §5: the x-ratelimit-* headers), from the same
-- script so it costs no round trip, in the headers' words and order (admission.core.quota_headers zips
-- them with the scope's names): 'tokens left|seconds to full[|requests left|seconds to full]|budget
-- left…|now', the request bucket's pair only where the scope has a request rate. Levels this call
-- already read or wrote are passed in; the others are read here (a throttle that stopped before them,
-- a replay).
local function quota(now, now_str, own_l, rq_l, charges, units)
  if not want_q then return '' end
  local own_r, own_d = tonumber(ARGV[7]), tonumber(ARGV[8])
  if not own_l then own_l = level(KEYS[2], own_r, own_d, now) end
  local q = whole(own_l) .. '|' .. to_full(own_l, own_r, own_d) .. '|'
  if not lim then return q .. now_str end
  local rr, rdep = tonumber(ARGV[34]), tonumber(ARGV[35])
  if rdep > 0 then
    if not rq_l then rq_l = level(KEYS[9], rr, rdep, now) end
    q = q .. whole(rq_l) .. '|' .. to_full(rq_l, rr, rdep) .. '|'
  end
  for _, ch in ipairs(charges or periods_now(now)) do
    q = q .. whole(tonumber(ch[2]) - (ch[4] + (units or 0))) .. '|'
  end
  return q .. now_str
end

if prev then
  -- A replay: 1, or 2 when the reservation is already settled (completed or expired).
  local head = string.sub(prev, 1, 5)
  local q = ''
  if want_q then
    local now, now_str = clock()
    q = quota(now, now_str)
  end
  if head == 'done\t' or head == 'expir' then return {answer_of(prev), 2, 0, q} end
  return {answer_of(prev), 1, 0, q}
end

local c, cls = tonumber(ARGV[3]), ARGV[5]
local now, now_str, sec, frac = clock()
local out = {'', 0, 0, ''}
local q_own, q_rq, q_charges = nil, nil, nil  -- what quota() need not read again

local function throttle(reason, ra, limit)
  local ans = 'T|' .. reason .. '|' .. ra
  if limit then ans = ans .. '|' .. limit end  -- which limit a QUOTA_EXCEEDED hit, when not the rate
  if spill_ok and q_own and q_own < c and (reason == 'QUOTA_EXCEEDED' or reason == 'RECLAIMED') then
    -- The own bucket is short and a spill may follow (issue 36.1, base.SPILLABLE): no final answer here.
    -- The hand-off marker lives as long as an admit's record, so every retry of this request goes to
    -- the spill call (spill.lua, on the target pool's tag), which decides it once; nothing is charged here.
    ans = 'S' .. string.sub(ans, 2)
    redis.call('SET', KEYS[1], ans, 'EX', ARGV[17])
    out[1] = ans
    out[4] = quota(now, now_str, q_own, q_rq, q_charges)
    return out
  end
  -- Replayed for its wait, at most an hour: a BUDGET_EXHAUSTED may advise days, and a record per
  -- refused request must not live that long (nor hide a budget raised meanwhile from a retry).
  redis.call('SET', KEYS[1], ans, 'EX', math.max(1, math.min(3600, tonumber(ra))))
  out[1] = ans
  out[4] = quota(now, now_str, q_own, q_rq, q_charges)
  return out
end

-- QUOTA_EXCEEDED advises the wait until the bucket(s) would have room.
local function quota_exceeded(deficit, rate, limit)
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
local units, charges, rq_l = 0, {}, nil
if lim then
  units = tonumber(ARGV[33])
  local untl = 0
  charges = periods_now(now)
  q_charges = charges
  for _, ch in ipairs(charges) do
    if ch[4] + units > tonumber(ch[2]) and tonumber(ch[3]) > untl then untl = tonumber(ch[3]) end
  end
  if untl > 0 then return throttle('BUDGET_EXHAUSTED', math.max(1, math.ceil(untl - now))) end
  local rr, rdep = tonumber(ARGV[34]), tonumber(ARGV[35])
  if rdep > 0 then
    rq_l = level(KEYS[9], rr, rdep, now)
    q_rq = rq_l
    if rq_l < 1 then return quota_exceeded(1 - rq_l, rr, 'rps') end
  end
end

local own_r, own_d = tonumber(ARGV[7]), tonumber(ARGV[8])
local pool_r, pool_d = tonumber(ARGV[9]), tonumber(ARGV[10])
local own_l = level(KEYS[2], own_r, own_d, now)
local pool_l = level(KEYS[3], pool_r, pool_d, now)
q_own = own_l
local degraded = ARGV[14] == '1'
local bor_reason, bor_retry = 'RECLAIMED', ARGV[19]
if degraded then bor_reason, bor_retry = 'PLATFORM_CAPACITY', ARGV[20] end
local pool_ok = room_above_margin(pool_l, c, tonumber(ARGV[13]))

-- Borrowed tokens written at `at` as they count at `now` (base.decayed).
local function decayed(u, at, now)
  if now > at then return u * math.exp(-(now - at) / tonumber(ARGV[27])) end
  return u
end

-- The pool's fair-share table: → this scope's borrowed tokens in the window, the active
-- borrowers' together and their weights together (this scope counted as active); entries neither
-- active nor borrowing are dropped (memory.py: _fair_read).
local function fair_read(now)
  local all = redis.call('HGETALL', KEYS[8])
  local mine, used, weights = 0, 0, tonumber(ARGV[25])
  for i = 1, #all, 2 do
    local f = {}
    for v in string.gmatch(all[i + 1], '[^|]+') do f[#f + 1] = tonumber(v) end
    local got = decayed(f[1], f[2], now)
    if all[i] == ARGV[26] then
      mine = got
      used = used + got
    elseif f[4] > now then
      used = used + got
      weights = weights + f[3]
    elseif got < 1e-3 then redis.call('HDEL', KEYS[8], all[i]) end
  end
  return mine, used, weights
end

-- This scope's entry: its borrowed tokens decayed to now plus `add`, active for ARGV[28] s more.
local function fair_put(now, now_str, add)
  local u = 0
  local got = redis.call('HGET', KEYS[8], ARGV[26])
  if got then
    local f = {}
    for v in string.gmatch(got, '[^|]+') do f[#f + 1] = tonumber(v) end
    u = decayed(f[1], f[2], now)
  end
  redis.call('HSET', KEYS[8], ARGV[26], num(u + add) .. '|' .. now_str .. '|' .. ARGV[25] .. '|' ..
    num(now + tonumber(ARGV[28])))
end

local source, bor_l, lend_l
-- What this admission charged the lend accounts, for complete.lua (lib.lua: the record's last field):
-- 'n|n × (key|rate|depth|wt)' and, for a borrowed one, 'table|member|weight|window|wt|when'.
local lent = nil
if cls == 'reserved' then
  if degraded and pool_l - c < tonumber(ARGV[15]) then return throttle('PLATFORM_CAPACITY', ARGV[20]) end
  if own_l < c then return quota_exceeded(c - own_l, own_r) end
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
  if bor_d <= 0 then return quota_exceeded(c - own_l, own_r) end
  bor_l = level(KEYS[4], bor_r, bor_d, now)  -- read only now: decide() needs it only here
  if bor_l < c then return quota_exceeded(c - math.max(own_l, bor_l), own_r + bor_r) end
  -- Lending limits and fair share (issue 36.3, mirrored by memory.py): every borrowed attempt
  -- keeps the scope active; the fair-share rule is base.fair_ok.
  local fw = tonumber(ARGV[25])
  if not pool_ok then
    if fw > 0 then fair_put(now, now_str, 0) end
    return throttle(bor_reason, bor_retry)
  end
  if fw > 0 then
    local room = pool_l - tonumber(ARGV[13])
    local lr, ld = tonumber(ARGV[23]), tonumber(ARGV[24])
    if ld > 0 then
      lend_l = level(KEYS[7], lr, ld, now)
      if lend_l < c then
        fair_put(now, now_str, 0)
        return quota_exceeded(c - lend_l, lr, 'lending')  -- borrowing used up: the lenders' limits
      end
      if lend_l < room then room = lend_l end
    end
    local mine, used, weights = fair_read(now)
    if mine * weights > (used + room) * fw then
      fair_put(now, now_str, 0)
      return quota_exceeded(0, 1, 'fair_share')  -- its share of the contended room used up: retry in 1 s
    end
    lent = '0|'
    if ld > 0 then
      put(KEYS[7], lend_l - c, now_str)
      lent = '1|' .. KEYS[7] .. '|' .. ARGV[23] .. '|' .. ARGV[24] .. '|' .. ARGV[3] .. '|'
    end
    fair_put(now, now_str, c)
    lent = lent .. KEYS[8] .. '|' .. ARGV[26] .. '|' .. ARGV[25] .. '|' .. ARGV[27] .. '|' .. ARGV[3] .. '|' .. now_str
  end
  source = 'borrowed'
end

-- An own admission where lenders limit lending (base.Lends, memory.py's _lender_charge): the keep-back
-- pays first (base.lender_split), the lend bucket the rest; never a refusal, debt bounded at one depth.
if source == 'entitlement' and ARGV[29] == '1' then
  local lr, ld, kd, x = tonumber(ARGV[23]), tonumber(ARGV[24]), tonumber(ARGV[31]), 0
  lent = '1|'
  if kd > 0 then
    local keep_l = level(KEYS[#KEYS], tonumber(ARGV[30]), kd, now)
    if keep_l > 0 then x = math.min(c, keep_l) end
    put(KEYS[#KEYS], keep_l - x, now_str)
    lent = '2|' .. KEYS[#KEYS] .. '|' .. ARGV[30] .. '|' .. ARGV[31] .. '|' .. num(x) .. '|'
  end
  put(KEYS[7], bounded(level(KEYS[7], lr, ld, now) - (c - x), ld), now_str)
  lent = lent .. KEYS[7] .. '|' .. ARGV[23] .. '|' .. ARGV[24] .. '|' .. num(c - x)
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
  if rq_l then put(KEYS[9], rq_l - 1, now_str) end
  local parts = {ARGV[32], ARGV[33]}
  for _, ch in ipairs(charges) do
    -- Kept a day past its boundary (the statement may still read it), then gone.
    redis.call('SET', ch[1], num(ch[4] + units), 'EXAT', math.ceil(tonumber(ch[3])) + 86400)
    parts[#parts + 1] = ch[1] .. '|' .. ch[2] .. '|' .. ch[3]
  end
  bud = '\t' .. table.concat(parts, '|')
end
if lent then
  if bud == '' then bud = '\t' end
  bud = bud .. '\t' .. lent
end

local expires
if string.find(ARGV[16], '^%d+$') then expires = (sec + ARGV[16]) .. frac  -- whole seconds: no float to format
else expires = num(now + tonumber(ARGV[16])) end
local ans = 'A|' .. ARGV[2] .. '|' .. ARGV[3] .. '|' .. source .. '|' .. expires
-- The record's meta says a borrowed admission is one, so its complete or expiry event is counted as
-- borrowed (base.borrowed_meta is the in-process twin).
local meta = ARGV[4]
if source == 'borrowed' then meta = string.sub(meta, 1, -2) .. ',"source_kind":"borrowed"}' end
redis.call('SET', KEYS[1], 'open\t' .. ans .. '\t' .. static .. '\t' .. ARGV[3] .. '\t' .. meta .. bud,
  'EX', ARGV[17])
redis.call('SADD', KEYS[6], KEYS[5])  -- every non-empty in-flight zset is listed (a no-op once it is)
redis.call('ZADD', KEYS[5], expires, ARGV[2])
out[1] = ans
out[3] = live + 1  -- the scope's reservations in flight now: the live ones and this one
local own_after = own_l - c
if source == 'borrowed' then own_after = own_l end
local rq_after = nil
if rq_l then rq_after = rq_l - 1 end
out[4] = quota(now, now_str, own_after, rq_after, charges, units)
return out
