-- KEYS (every key this script touches, named from the signed id: Redis Cluster): 1 record, 2 the
-- scope's in-flight zset, 3 the bucket that paid, 4 the pool's bucket, 5.. the scope's period
-- budget keys around now (issue 23; the record names the ones it charged, which are among them).
-- ARGV: 1 reservation id, 2 prompt, 3 cached, 4 output, 5 status, 6 idem ttl, 7 the revocation-epoch check (lib.lua: epoch_stale; reply {'E', epoch} when stale),
-- 8 '' or what the signed id says when the store forgot the record (tab-separated:
-- ck cr cd pk pr pd wo wc mo est expires answer [budgets]; base.Lost), 9 the scope's hash where the caller
-- knows it ('' else; also in KEYS): where a period's spend lives since issue 49.1, one field per period named
-- for its key (a record written since names its hash itself: '@<key>' after its budgets).
-- Reply: nil (unknown), {result, 0 first | 1 replay, meta}, {result, 3}: settled from the id, or
-- {'', 4, ik, ck, pk, period keys...}: the record was written under other keys (its scope renamed
-- since, or an op built without them): the caller asks again with these.
-- Refunds the unused estimate (or charges an overrun into debt) on the bucket that paid and on the
-- pool bucket, frees the concurrency slot. Settling twice returns the first result while it is kept
-- (idem ttl from the first settlement).
local stale = epoch_stale(ARGV[7])
if stale then return {'E', stale} end

-- A period's spend: a field of the scope's hash `h`, or (a store written before issue 49.1, not yet
-- moved) the period's own key. → spent, whether it is in the hash.
local function spent(h, k)
  if h then
    local v = redis.call('HGET', h, k)
    if v then return tonumber(v), true end
  end
  local v = redis.call('GET', k)
  if v then return tonumber(v), false end
  return 0, h ~= nil
end

local function spend(h, k, v, in_hash, exat)
  if in_hash then redis.call('HSET', h, k, num(v))
  elseif exat then redis.call('SET', k, num(v), 'EXAT', exat)
  else redis.call('SET', k, num(v), 'KEEPTTL') end
end
local rk, rid = KEYS[1], ARGV[1]
local raw = redis.call('GET', rk)
if raw and string.sub(raw, 1, 2) == 'T|' then return nil end  -- only a throttle answer
local now, now_str = clock()
if not raw then
  if ARGV[8] == '' then return nil end
  -- Forgotten (a restart without its data): the reserve's debit went with the record (one script
  -- wrote both), so the actual cost is charged now, against the buckets the signed id names.
  local g = {}
  for v in string.gmatch(ARGV[8], '[^\t]+') do g[#g + 1] = v end
  local est, exp = tonumber(g[10]), tonumber(g[11])
  if exp > 0 and exp <= now then
    return {cjson.encode({reservation_id = rid, status = 'expired', reserved_wt = est, actual_wt = est,
      refunded_wt = 0}), 3}
  end
  local prompt, cached, output = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
  local mo, cap = tonumber(g[9]), nil
  if output > mo then output, cap = mo, mo end
  local actual = (prompt - cached) + tonumber(g[8]) * cached + tonumber(g[7]) * output
  local cd, pd = tonumber(g[3]), tonumber(g[6])
  put(KEYS[3], bounded(level(KEYS[3], tonumber(g[2]), cd, now) - actual, cd), now_str)
  put(KEYS[4], bounded(level(KEYS[4], tonumber(g[5]), pd, now) - actual, pd), now_str)
  if g[13] then
    -- Period budgets (issue 23): the actual use, in the budget's unit, into the periods the
    -- reservation was made in (g[13]: unit|key|limit|end…) while they last and are in KEYS.
    local b, declared = {}, {}
    for v in string.gmatch(g[13], '[^|]+') do b[#b + 1] = v end
    for i = 5, #KEYS do declared[KEYS[i]] = true end
    local h = nil
    if ARGV[9] and ARGV[9] ~= '' and declared[ARGV[9]] then h = ARGV[9] end
    local au = actual
    if b[1] == 'tokens' then au = prompt + output elseif b[1] == 'requests' then au = 1 end
    for i = 2, #b, 3 do
      local lim, e = tonumber(b[i + 1]), tonumber(b[i + 2])
      if (h or declared[b[i]]) and e > now then
        local used, in_hash = spent(h, b[i])
        used = used + au
        if used > 2 * lim then used = 2 * lim end
        spend(h, b[i], used, in_hash, math.ceil(e) + 86400)
      end
    end
  end
  local result = cjson.encode({reservation_id = rid, status = ARGV[5], reserved_wt = est, actual_wt = actual,
    refunded_wt = est - actual, output_cap = cap})
  redis.call('SET', rk, join({'done', g[12], num(now + tonumber(ARGV[6])), result}), 'EX', ARGV[6])
  return {result, 3}
end
local f = split(raw)
if f[1] == 'done' then
  if tonumber(f[3]) <= now then return nil end
  return {f[4], 1}
end
-- The keys this record was written with must be the ones passed (they are, unless the scope was
-- renamed since or the op was built by hand): else they go back to the caller, who asks again.
local declared = {}
for i = 5, #KEYS do declared[KEYS[i]] = true end
local need, missing = {'', 4, f[3], f[4], f[7]}, f[3] ~= KEYS[2] or f[4] ~= KEYS[3] or f[7] ~= KEYS[4]
local hk = nil  -- the scope's hash holding the periods' spend (a record written before issue 49.1: ARGV 9)
if ARGV[9] and ARGV[9] ~= '' and declared[ARGV[9]] then hk = ARGV[9] end
if f[15] and f[15] ~= '' then
  local i = 0
  for v in string.gmatch(f[15], '[^|]+') do
    i = i + 1
    if string.sub(v, 1, 1) == '@' then
      hk = string.sub(v, 2)
      need[#need + 1] = hk
      if not declared[hk] then missing = true end
    elseif i >= 3 and (i - 3) % 3 == 0 then
      need[#need + 1] = v
      if not declared[v] then missing = true end
    end
  end
end
-- What the reserve charged the lend accounts (issue 36.3; reserve.lua's `lent`): n buckets as
-- key|rate|depth|wt, then for a borrowed one the fair-share table|member|weight|window|wt|when.
local lent, nb = nil, 0
if f[16] then
  lent = {}
  for v in string.gmatch(f[16], '[^|]+') do lent[#lent + 1] = v end
  nb = tonumber(lent[1])
  local ks = {}
  for i = 0, nb - 1 do ks[#ks + 1] = lent[2 + 4 * i] end
  if #lent > 1 + 4 * nb then ks[#ks + 1] = lent[2 + 4 * nb] end
  for _, k in ipairs(ks) do
    need[#need + 1] = k
    if not declared[k] then missing = true end
  end
end
if missing then return need end
local est = tonumber(f[13])
local first = nil
if f[1] == 'open' then
  local exp = redis.call('ZSCORE', KEYS[2], rid)
  -- Past its TTL: settled at the full estimate; whoever expires it reports it.
  if (not exp) or expiry_s(exp) <= now then
    redis.call('ZREM', KEYS[2], rid)
    first = expire_record(rk)
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
-- Settled output is capped at the envelope's max output; the cap is reported with the result.
local mo, cap = tonumber(f[12]), nil
if output > mo then output, cap = mo, mo end
local actual = (prompt - cached) + tonumber(f[11]) * cached + tonumber(f[10]) * output
local delta = est - actual
local cd, pd = tonumber(f[6]), tonumber(f[9])
put(KEYS[3], bounded(level(KEYS[3], tonumber(f[5]), cd, now) + delta, cd), now_str)
put(KEYS[4], bounded(level(KEYS[4], tonumber(f[8]), pd, now) + delta, pd), now_str)
if lent and delta ~= 0 and est > 0 then
  -- Each lend account settles the difference in the proportion it was charged (base.settled_part).
  for i = 0, nb - 1 do
    local k, r, d = lent[2 + 4 * i], tonumber(lent[3 + 4 * i]), tonumber(lent[4 + 4 * i])
    put(k, bounded(level(k, r, d, now) + delta * tonumber(lent[5 + 4 * i]) / est, d), now_str)
  end
  if #lent > 1 + 4 * nb then
    -- The borrower's count in the fair-share table, as if the reserve had counted the actual (decayed
    -- since it was made; memory.py: _fair_settle), never below nothing.
    local b = 2 + 4 * nb
    local fk, member, window, at = lent[b], lent[b + 1], tonumber(lent[b + 3]), tonumber(lent[b + 5])
    local back = delta * tonumber(lent[b + 4]) / est
    if now > at then back = back * math.exp(-(now - at) / window) end
    local g = {'0', now_str, lent[b + 2], now_str}
    local got = redis.call('HGET', fk, member)
    if got then
      g = {}
      for v in string.gmatch(got, '[^|]+') do g[#g + 1] = v end
    end
    local u = tonumber(g[1])
    if now > tonumber(g[2]) then u = u * math.exp(-(now - tonumber(g[2])) / window) end
    u = u - back
    if u < 0 then u = 0 end
    if g[8] then
      -- Its borrow bucket (the one this reservation charged) as it is now: refilled since the entry was
      -- written and settled by the same delta (fair.settled_entry, memory.py's twin).
      local bd = tonumber(g[7])
      local bl = tonumber(g[5]) + tonumber(g[6]) * math.max(0, now - tonumber(g[2]))
      if bl > bd then bl = bd end
      g[5] = num(bounded(bl + delta, bd))
    end
    -- The other fields (weight, active until, its rate, depth and last cost: fair.py) stay.
    g[1], g[2] = num(u), now_str
    redis.call('HSET', fk, member, table.concat(g, '|'))
  end
end
if f[15] and f[15] ~= '' then
  -- Period budgets (issue 23): refund or charge the difference in the budget's unit, into the
  -- periods charged at reserve while they last; use stays within [0, 2 × limit] (debt bounded).
  local b = {}
  for v in string.gmatch(f[15], '[^|]+') do
    if string.sub(v, 1, 1) ~= '@' then b[#b + 1] = v end
  end
  local au = actual
  if b[1] == 'tokens' then au = prompt + output elseif b[1] == 'requests' then au = 1 end
  local back = tonumber(b[2]) - au
  for i = 3, #b, 3 do
    local lim = tonumber(b[i + 1])
    if back ~= 0 and tonumber(b[i + 2]) > now then
      local used, in_hash = spent(hk, b[i])
      used = used - back
      if used < 0 then used = 0 elseif used > 2 * lim then used = 2 * lim end
      spend(hk, b[i], used, in_hash, nil)
    end
  end
end
redis.call('ZREM', KEYS[2], rid)
local result = cjson.encode({reservation_id = rid, status = ARGV[5], reserved_wt = est, actual_wt = actual,
  refunded_wt = delta, output_cap = cap})
-- The record keeps its TTL: the reserve answer stays replayable as long as before.
redis.call('SET', rk, join({'done', f[2], num(now + tonumber(ARGV[6])), result}), 'KEEPTTL')
return {result, 0, f[14]}
