-- Shared helpers, prepended to each operation script when it is loaded (one script per operation).
-- Time comes from Redis itself so every process agrees on it. Every redis.call and every new key
-- costs on the hot path: a reservation is one string that is also its request's idempotency
-- record, and static values arrive preformatted from Python (redis.py) so they are copied, not
-- formatted here.
-- → now as a number, as its exact decimal string, and the string's fraction ('.123456'): buckets
-- and expiry times are stored as strings built from these, as formatting a float costs more than
-- a redis.call.
local function clock()
  local t = redis.call('TIME')
  local frac = '.' .. string.rep('0', 6 - #t[2]) .. t[2]
  local s = t[1] .. frac
  return tonumber(s), s, t[1], frac
end

local function num(x) return string.format('%.17g', x) end

-- Token bucket: refilled lazily; missing means full. Level may be negative (debt from overruns).
-- level_of: the same from the bucket's fields already read ({l, t, ...}).
local function level_of(v, rate, depth, now)
  if not v[1] then return depth end
  local l = tonumber(v[1]) + rate * math.max(0, now - tonumber(v[2]))
  if l > depth then l = depth end
  return l
end

local function level(key, rate, depth, now)
  return level_of(redis.call('HMGET', key, 'l', 't'), rate, depth, now)
end

local function put(key, l, now_str)
  redis.call('HSET', key, 'l', num(l), 't', now_str)
end

-- A bucket's debt is bounded at one depth (docs/contract.md §5): one oversized overrun must not lock a
-- scope or its pool for good; the level never rises above the depth either.
local function bounded(l, depth)
  if l < -depth then return -depth end
  if l > depth then return depth end
  return l
end

-- What every admission that is not a lender's own needs (borrowed, best_effort, spilled): the pool
-- keeps its reclaim margin after it (base.room_above_margin).
local function room_above_margin(pool_l, c, margin) return pool_l - c >= margin end

-- The record under '<prefix>r:<reservation id>', tab-separated (JSON escapes tabs, so meta may
-- come last):
--   a throttle answer:  'T|reason|retry' (no tabs; it is all the request needs to replay)
--   open or expired:    st, answer, ik (in-flight zset), ck, cr, cd (bucket that paid: key,
--                       rate, depth), pk, pr, pd (pool), wo, wc, mo (the envelope's max output:
--                       settled output is capped there), est, meta, and with budgets (issue 23)
--                       'unit|units|key|limit|end…' (absent on records without budgets or lending; ''
--                       on those with lending but no budgets), then what the reserve charged the lend
--                       accounts (issue 36.3: reserve.lua's `lent`; absent where none)
--   settled:            'done', answer, until (the result is forgotten then), result-json
local function split(s)
  local out, i = {}, 1
  while true do
    local j = string.find(s, '\t', i, true)
    if (not j) or #out == 15 then out[#out + 1] = string.sub(s, i); return out end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

local function join(f) return table.concat(f, '\t') end

-- The reserve answer a record replays: itself for a throttle, else its second field.
local function answer_of(raw)
  local a = string.find(raw, '\t', 1, true)
  if not a then return raw end
  local b = string.find(raw, '\t', a + 1, true)
  return string.sub(raw, a + 1, b - 1)
end

-- Settle one reservation past its TTL at its full estimate (it was debited in full at reserve):
-- its record `rk` (always a key the caller passed in KEYS: Redis Cluster) is marked expired.
-- → its meta when this call expired it, nil when it was no longer open.
local function expire_record(rk)
  local raw = redis.call('GET', rk)
  if (not raw) or string.sub(raw, 1, 5) ~= 'open\t' then return nil end
  local f = split(raw)
  f[1] = 'expired'
  redis.call('SET', rk, join(f), 'KEEPTTL')
  return f[14]
end

-- The token-revocation epoch (docs/serving-path-faults.md): `arg` is 'e:<epoch key>\t<the epoch
-- the caller's token check was made under>', or anything else for no check (library mode, Redis
-- Cluster). → nil when it matches; else the current epoch, and the caller verifies its token again
-- before asking anew (nothing was written). A store that lost its data has no epoch: it gets a
-- new one, so every process verifies its tokens again (a data loss counts as a revocation).
-- `cur`: the epoch key's value when the caller already read it (reserve.lua: with its record, one MGET).
local function epoch_key(arg)
  if string.sub(arg, 1, 2) ~= 'e:' then return nil end
  return string.sub(arg, 3, string.find(arg, '\t', 3, true) - 1)
end

local function epoch_stale(arg, cur)
  if string.sub(arg, 1, 2) ~= 'e:' then return nil end
  local tab = string.find(arg, '\t', 3, true)
  local ek = string.sub(arg, 3, tab - 1)
  if cur == nil then cur = redis.call('GET', ek) end
  if not cur then
    local t = redis.call('TIME')
    cur = 't' .. t[1] .. t[2]
    redis.call('SET', ek, cur)
  end
  if cur == string.sub(arg, tab + 1) then return nil end
  return cur
end
