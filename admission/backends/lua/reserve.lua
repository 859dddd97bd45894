-- Inputs by name (admission/backends/inputs.py: the table, and the preamble that reads them, which
-- redis.py prepends): A_<name> the arguments, K_<name> the keys (locals), all under the pool's hash tag (no key is
-- built here: Redis Cluster). K: record (reservation + idempotency), own / pool / borrow buckets,
-- inflight (zset), inflight_sets (what the pool's sweep walks), lend (the pool's lend bucket), fair (the
-- pool's fair-share table: member → 'borrowed|at|weight|active until|borrow level|borrow rate|borrow
-- depth|cost', admission.backends.fair), rq (request rate), keep (a limited lender's keep-back bucket,
-- always the last key); A_periods: per period budget its limit, start, stop, next_stop and three keys
-- (the previous, current and next period's: this script's clock picks one).
-- Reply: {answer, 0 new | 1 replay | 2 replay of a settled one, in flight after an admit (else 0),
--        remaining quota ('' when not wanted), ids of this scope's reservations past their TTL...}.
--        The caller settles those ids (expire.lua: their records are not this script's keys).
-- Mirrors base.decide() and memory.py.
-- The revocation epoch and the record in one MGET (the epoch's key is outside the pool's tag: a single
-- Redis only; on a Redis Cluster the web tier checks the epoch itself and passes no check here).
local ek, prev = epoch_key(A_epoch), nil
if ek then
  local v = redis.call('MGET', ek, K_record)
  local stale = epoch_stale(A_epoch, v[1])
  if stale then return {'E', stale} end
  prev = v[2]
else
  prev = redis.call('GET', K_record)
end
local want_q, spill_ok, lim = A_want_quota, A_spill_ok, A_limited

-- The period buckets in force by Redis' clock: {key, limit, end, used, how} per period (the caller
-- passed the previous, current and next period's keys and boundaries). A period's spend is a field of
-- the scope's hash named for the period's key (issue 49.1); `vals`: those fields as read with the scope's
-- other fields (nil: read here). A field absent is the period's first spend in the hash: `how` 1, or 2
-- when its spend is still under the key itself (a store written before: read there, moved on admission).
local periods_pick, periods_fill, periods_now, rq_level  -- built only with limits (A_limited)
local rq_old = false
if lim then
  function periods_pick(now)
    local got = {}
    for _, p in ipairs(A_periods) do
      local k, kend = p.keys[1], p.start_s
      if now < p.start then kend = p.start_s
      elseif now < p.stop then k, kend = p.keys[2], p.stop_s
      else k, kend = p.keys[3], p.next_stop end
      got[#got + 1] = {k, p.limit_s, kend, 0, 0, p.keys}
    end
    return got
  end

  function periods_fill(got, vals, off)
    for i, g in ipairs(got) do
      local v = vals[off + i]
      if v then g[4] = tonumber(v)
      else
        g[5] = 1
        v = redis.call('GET', g[1])
        if v then g[4], g[5] = tonumber(v), 2 end
      end
    end
    return got
  end

  function periods_now(now)
    local got, ks = periods_pick(now), {}
    if #got == 0 then return got end
    for i, g in ipairs(got) do ks[i] = g[1] end
    return periods_fill(got, redis.call('HMGET', K_own, unpack(ks)), 0)
  end

  -- The request-rate bucket lives in the scope's hash (its own bucket's key), one field named for its
  -- key: 'level|when'. `raw`: that field as read (nil: absent, so the bucket is still under its own key,
  -- as a store written before issue 49.1 keeps it; an admission moves it into the hash).
  function rq_level(raw, now)
    local v
    if raw then
      local bar = string.find(raw, '|', 1, true)
      v = {string.sub(raw, 1, bar - 1), string.sub(raw, bar + 1)}
    else
      v = redis.call('HMGET', K_rq, 'l', 't')
      rq_old = v[1] ~= false and v[1] ~= nil
    end
    return level_of(v, A_rq_rate, A_rq_depth, now)
  end
end

-- The header values (quota.py's whole, to_full: the same rule in Python for the memory store), formatted
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
  local own_r, own_d = A_own_rate, A_own_depth
  if not own_l then own_l = level(K_own, own_r, own_d, now) end
  local q = whole(own_l) .. '|' .. to_full(own_l, own_r, own_d) .. '|'
  if not lim then return q .. now_str end
  local rr, rdep = A_rq_rate, A_rq_depth
  if rdep > 0 then
    if not rq_l then rq_l = rq_level(redis.call('HGET', K_own, K_rq), now) end
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

local c, cls = A_cost, A_traffic_class
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
    redis.call('SET', K_record, ans, 'EX', A_record_ttl)
    out[1] = ans
    out[4] = quota(now, now_str, q_own, q_rq, q_charges)
    return out
  end
  -- Replayed for its wait, at most an hour: a BUDGET_EXHAUSTED may advise days, and a record per
  -- refused request must not live that long (nor hide a budget raised meanwhile from a retry).
  redis.call('SET', K_record, ans, 'EX', math.max(1, math.min(3600, tonumber(ra))))
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

-- The scope's hash (its own bucket's key) holds, besides the bucket ('l', 't'), a field named for the
-- in-flight zset: no reservation in that zset expires before it (a lower bound, written with each
-- admission). So the zset costs one ZCARD while nothing in it is due; only when something may be (or
-- the field is absent: a store written before issue 49.1) is it read: live ones counted, and up to 16
-- due ones handed to the caller, which settles them at once (expire.lua), so a scope with traffic needs
-- no beat to free its slots; the pool's sweep settles any the caller did not. Expire on access: a
-- reservation past its TTL no longer holds a slot (only live ones count).
local sv, picked
if lim then  -- with the request-rate bucket's field and the period budgets' (4, 5…)
  picked = periods_pick(now)
  local f = {K_own, 'l', 't', K_inflight, K_rq}
  for _, g in ipairs(picked) do f[#f + 1] = g[1] end
  sv = redis.call('HMGET', unpack(f))
else sv = redis.call('HMGET', K_own, 'l', 't', K_inflight) end
local n_in = redis.call('ZCARD', K_inflight)
local live, due_at = n_in, tonumber(sv[3])
if n_in > 0 and not (due_at and due_at > now) then
  -- The earliest expiry (lib.lua: scores in microseconds; one in seconds, written before, sorts first).
  local lo = redis.call('ZRANGE', K_inflight, 0, 0, 'WITHSCORES')[2]
  due_at = expiry_s(lo)
  if due_at <= now then
    local now_us, mixed = sec .. string.sub(frac, 2), tonumber(lo) < US_MIN
    live = live_in(K_inflight, now_str, now_us, mixed)
    local due = {}
    if mixed then due = redis.call('ZRANGEBYSCORE', K_inflight, '-inf', now_str, 'LIMIT', 0, 16) end
    if #due < 16 then
      for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_inflight, US_MIN, now_us, 'LIMIT', 0, 16 - #due)) do
        due[#due + 1] = id
      end
    end
    for _, id in ipairs(due) do out[#out + 1] = id end
    due_at = 0  -- due ones stay until expire.lua settles them: read again next time
  end
end
if live >= A_max_concurrency then return throttle('CONCURRENCY_LIMIT', A_retry_concurrency) end

-- Period budgets, then the request rate, then the token rate (mirrored by memory.py). A period
-- bucket holds what was spent under a key named for its period: it resets by key change at the
-- boundary and never refills in between.
local units, charges, rq_l = 0, nil, nil  -- charges: with limits only
if lim then
  units = A_units
  local untl = 0
  charges = periods_fill(picked, sv, 4)
  q_charges = charges
  for _, ch in ipairs(charges) do
    if ch[4] + units > tonumber(ch[2]) and tonumber(ch[3]) > untl then untl = tonumber(ch[3]) end
  end
  if untl > 0 then return throttle('BUDGET_EXHAUSTED', math.max(1, math.ceil(untl - now))) end
  local rr, rdep = A_rq_rate, A_rq_depth
  if rdep > 0 then
    rq_l = rq_level(sv[4], now)
    q_rq = rq_l
    if rq_l < 1 then return quota_exceeded(1 - rq_l, rr, 'rps') end
  end
end

local own_r, own_d = A_own_rate, A_own_depth
local pool_d = A_pool_depth
local own_l = level_of(sv, own_r, own_d, now)
local pool_l = level(K_pool, A_pool_rate, pool_d, now)
q_own = own_l
local degraded = A_degraded
local bor_reason, bor_retry = 'RECLAIMED', A_retry_reclaimed
if degraded then bor_reason, bor_retry = 'PLATFORM_CAPACITY', A_retry_platform end
local pool_ok = room_above_margin(pool_l, c, A_margin)

local source, bor_l, lend_l
-- What this admission charged the lend accounts, for complete.lua (lib.lua: the record's last field):
-- 'n|n × (key|rate|depth|wt)' and, for a borrowed one, 'table|member|weight|window|wt|when'.
local lent = nil
if cls == 'reserved' then
  if degraded and pool_l - c < A_reserved_floor then return throttle('PLATFORM_CAPACITY', A_retry_platform) end
  if own_l < c then return quota_exceeded(c - own_l, own_r) end
  source = 'entitlement'
elseif own_l >= c then
  if cls == 'shared' then
    if degraded and pool_l - c < 0 then return throttle('PLATFORM_CAPACITY', A_retry_platform) end
  elseif not pool_ok then
    return throttle(bor_reason, bor_retry)
  end
  source = 'entitlement'
else
  local bor_r, bor_d = A_borrow_rate, A_borrow_depth
  if bor_d <= 0 then return quota_exceeded(c - own_l, own_r) end
  bor_l = level(K_borrow, bor_r, bor_d, now)  -- read only now: decide() needs it only here
  if bor_l < c then return quota_exceeded(c - math.max(own_l, bor_l), own_r + bor_r) end
  -- The fair-share helpers, built only on this path (a closure defined at the top would be built on every call).
  -- Borrowed tokens written at `at` as they count at `now` (fair.decayed).
  local function decayed(u, at, now)
    if now > at then return u * math.exp(-(now - at) / A_window_s) end
    return u
  end

  local function fields(raw)
    local f = {}
    for v in string.gmatch(raw, '[^|]+') do f[#f + 1] = tonumber(v) end
    return f
  end

  -- What an entry's own borrowing limit lets it take now (fair.can_take; an entry without those fields,
  -- written before issue 48.3: unlimited).
  local function can_take(f, now)
    if not f[8] then return math.huge end
    local l = f[5] + f[6] * math.max(0, now - f[2])
    if l > f[7] then l = f[7] end
    return l
  end

  -- The pool's fair-share table (fair.py; memory.py: _fair_read): → this scope's borrowed tokens in the
  -- window, the active borrowers' together, their weights together (this scope counted as active), and
  -- {held, weight, can take} of each other active one. A borrower counts as active while its entry is
  -- recent and its own limit would let it take what it last asked; entries neither active nor borrowing
  -- are dropped.
  local function fair_read(now)
    local all = redis.call('HGETALL', K_fair)
    local mine, used, weights, others = 0, 0, A_weight, {}
    for i = 1, #all, 2 do
      local f = fields(all[i + 1])
      local got = decayed(f[1], f[2], now)
      if all[i] == A_member then
        mine = got
        used = used + got
      elseif f[4] > now and (not f[8] or can_take(f, now) >= f[8]) then
        used = used + got
        weights = weights + f[3]
        others[#others + 1] = {got, f[3], can_take(f, now)}
      elseif f[4] <= now and got < 1e-3 then redis.call('HDEL', K_fair, all[i]) end
    end
    return mine, used, weights, others
  end

  -- fair.fair_ok: within its share, or what it takes leaves the more-deserving ones what they are owed.
  local function fair_ok(mine, pie, weights, room, others)
    local w = A_weight
    if mine * weights <= pie * w then return true end
    local need = 0
    for _, o in ipairs(others) do
      if o[1] * w < mine * o[2] then
        need = need + math.min(math.max(0, o[2] * pie / weights - o[1]), o[3])
      end
    end
    return room - c >= need
  end

  -- This scope's entry: its borrowed tokens decayed to now plus `add`, active for A_active_s more, and
  -- what its own borrow bucket holds after this attempt (`bl`), with its rate, depth and this cost.
  local function fair_put(now, now_str, add, bl)
    local u = 0
    local got = redis.call('HGET', K_fair, A_member)
    if got then
      local f = fields(got)
      u = decayed(f[1], f[2], now)
    end
    redis.call('HSET', K_fair, A_member, num(u + add) .. '|' .. now_str .. '|' .. A_weight_s .. '|' ..
      num(now + A_active_s) .. '|' .. num(bl) .. '|' .. num(A_borrow_rate) .. '|' .. num(A_borrow_depth) ..
      '|' .. A_cost_s)
  end
  -- Lending limits and fair share (issues 36.3, 48.3; mirrored by memory.py): every borrowed attempt
  -- its own limit lets through keeps the scope active; the fair-share rule is fair.fair_ok.
  local fw = A_weight
  if not pool_ok then
    if fw > 0 then fair_put(now, now_str, 0, bor_l) end
    return throttle(bor_reason, bor_retry)
  end
  if fw > 0 then
    local room = pool_l - A_margin
    local ld = A_lend_depth
    if ld > 0 then
      lend_l = level(K_lend, A_lend_rate, ld, now)
      if lend_l < c then
        fair_put(now, now_str, 0, bor_l)
        return quota_exceeded(c - lend_l, A_lend_rate, 'lending')  -- borrowing used up: the lenders' limits
      end
      if lend_l < room then room = lend_l end
    end
    local mine, used, weights, others = fair_read(now)
    if not fair_ok(mine, used + room, weights, room, others) then
      fair_put(now, now_str, 0, bor_l)
      return quota_exceeded(0, 1, 'fair_share')  -- room owed to more-deserving borrowers: retry in 1 s
    end
    lent = '0|'
    if ld > 0 then
      put(K_lend, lend_l - c, now_str)
      lent = '1|' .. K_lend .. '|' .. A_lend_rate_s .. '|' .. A_lend_depth_s .. '|' .. A_cost_s .. '|'
    end
    fair_put(now, now_str, c, bor_l - c)
    lent = lent .. K_fair .. '|' .. A_member .. '|' .. A_weight_s .. '|' .. A_window_s_s .. '|' .. A_cost_s ..
      '|' .. now_str
  end
  source = 'borrowed'
end

-- An own admission where lenders limit lending (base.Lends, memory.py's _lender_charge): the keep-back
-- pays first (base.lender_split), the lend bucket the rest; never a refusal, debt bounded at one depth.
if source == 'entitlement' and A_lender_charges then
  local lr, ld, kd, x = A_lend_rate, A_lend_depth, A_keep_depth, 0
  lent = '1|'
  if kd > 0 then
    local keep_l = level(K_keep, A_keep_rate, kd, now)
    if keep_l > 0 then x = math.min(c, keep_l) end
    put(K_keep, keep_l - x, now_str)
    lent = '2|' .. K_keep .. '|' .. A_keep_rate_s .. '|' .. A_keep_depth_s .. '|' .. num(x) .. '|'
  end
  put(K_lend, bounded(level(K_lend, lr, ld, now) - (c - x), ld), now_str)
  lent = lent .. K_lend .. '|' .. A_lend_rate_s .. '|' .. A_lend_depth_s .. '|' .. num(c - x)
end

local expires, score
if string.find(A_ttl, '^%d+$') then  -- whole seconds: no float to format
  expires = (sec + A_ttl) .. frac
  score = (sec + A_ttl) .. string.sub(frac, 2)
else
  expires = num(now + tonumber(A_ttl))
  score = string.format('%.0f', math.ceil(tonumber(expires) * 1e6))  -- never before the expiry
end
-- The in-flight zset's lower bound (above) after this admission's ZADD.
local due_s = expires
if due_at and n_in > 0 and due_at < tonumber(expires) then due_s = num(due_at) end

local static, own_after = A_record_own, own_l - c
if source == 'borrowed' then
  static, own_after = A_record_borrowed, own_l
  put(K_borrow, bor_l - c, now_str)
end
-- The scope's hash: its own bucket, the in-flight bound, the request-rate bucket, the period budgets
-- (a plain scope's in one call, no table built).
if not lim then redis.call('HSET', K_own, 'l', num(own_after), 't', now_str, K_inflight, due_s)
else
  local hs = {K_own, 'l', num(own_after), 't', now_str, K_inflight, due_s}
  if rq_l then hs[#hs + 1], hs[#hs + 2] = K_rq, num(rq_l - 1) .. '|' .. now_str end
  for _, ch in ipairs(charges) do hs[#hs + 1], hs[#hs + 2] = ch[1], num(ch[4] + units) end
  redis.call('HSET', unpack(hs))
  if rq_old then redis.call('DEL', K_rq) end  -- moved into the hash
  for _, ch in ipairs(charges) do
    if ch[5] == 2 then redis.call('DEL', ch[1]) end  -- moved into the hash
    if ch[5] >= 1 then
      -- The period's first spend in the hash (once per period): the fields of this budget's periods
      -- other than the previous, this and the next one go (a period's spend is kept past its end until then).
      local stem, keep = string.match(ch[1], '^(.*:)[^:]*$'), {}
      for _, k in ipairs(ch[6]) do keep[k] = true end
      for _, f in ipairs(redis.call('HKEYS', K_own)) do
        if string.sub(f, 1, #stem) == stem and not keep[f] then redis.call('HDEL', K_own, f) end
      end
    end
  end
end
put(K_pool, bounded(pool_l - c, pool_d), now_str)  -- lenders may take the pool into debt, one depth at most

-- The budgets charged, for complete.lua: unit|units|key|limit|end per period (appended to the record).
local bud = ''
if lim then
  local parts = {A_unit, A_units_s}
  for _, ch in ipairs(charges) do parts[#parts + 1] = ch[1] .. '|' .. ch[2] .. '|' .. ch[3] end
  if #charges > 0 then parts[#parts + 1] = '@' .. K_own end  -- the hash holding them (complete.lua)
  bud = '\t' .. table.concat(parts, '|')
end
if lent then
  if bud == '' then bud = '\t' end
  bud = bud .. '\t' .. lent
end

local ans = 'A|' .. A_rid .. '|' .. A_cost_s .. '|' .. source .. '|' .. expires
-- The record's meta says a borrowed admission is one, so its complete or expiry event is counted as
-- borrowed (base.borrowed_meta is the in-process twin).
local meta = A_meta
if source == 'borrowed' then meta = string.sub(meta, 1, -2) .. ',"source_kind":"borrowed"}' end
redis.call('SET', K_record, 'open\t' .. ans .. '\t' .. static .. '\t' .. A_cost_s .. '\t' .. meta .. bud,
  'EX', A_record_ttl)
-- The pool's sweep walks the in-flight zsets its set lists: a zset is listed with its scope's first
-- admission (the hash had no bound for it: a new scope, a store written before issue 49.1 or one that
-- lost its data) and stays listed (expire.lua no longer unlists an empty one), not once per reserve.
if not sv[3] then redis.call('SADD', K_inflight_sets, K_inflight) end
redis.call('ZADD', K_inflight, score, A_rid)
out[1] = ans
out[3] = live + 1  -- the scope's reservations in flight now: the live ones and this one
local rq_after = nil
if rq_l then rq_after = rq_l - 1 end
out[4] = quota(now, now_str, own_after, rq_after, charges, units)
return out
