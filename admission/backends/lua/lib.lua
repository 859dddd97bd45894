-- Shared helpers, prepended to each operation script when it is loaded (one script per operation).
-- Time comes from Redis itself so every process agrees on it. Every redis.call costs: the hot
-- path keeps them few (buckets never expire; a reservation is one string, not a hash).
local function now_s()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end

local function num(x) return string.format('%.17g', x) end

-- Token bucket: refilled lazily; missing means full. Level may be negative (debt from overruns).
local function level(key, rate, depth, now)
  local v = redis.call('HMGET', key, 'l', 't')
  if not v[1] then return depth end
  local l = tonumber(v[1]) + rate * math.max(0, now - tonumber(v[2]))
  if l > depth then l = depth end
  return l
end

local function put(key, l, now)
  redis.call('HSET', key, 'l', num(l), 't', num(now))
end

-- A reservation record: tab-separated fields (JSON escapes tabs, so meta may come last).
-- st, ik (in-flight zset), cb, cr, cd (bucket that paid: key, rate, depth), pk, pr, pd (pool),
-- est, wo, wc, src, meta. A settled one is 'done' TAB result-json.
local function split(s)
  local out, i = {}, 1
  while true do
    local j = string.find(s, '\t', i, true)
    if (not j) or #out == 12 then out[#out + 1] = string.sub(s, i); return out end
    out[#out + 1] = string.sub(s, i, j - 1)
    i = j + 1
  end
end

local function join(f) return table.concat(f, '\t') end

-- Settle one reservation past its TTL at its full estimate (it was debited in full at reserve).
local function expire_one(prefix, exp_key, id)
  local rk = prefix .. 'res:' .. id
  redis.call('ZREM', exp_key, id)
  local raw = redis.call('GET', rk)
  if not raw then return nil end
  local f = split(raw)
  if f[1] ~= 'open' then return nil end
  f[1] = 'expired'
  redis.call('SET', rk, join(f), 'KEEPTTL')
  redis.call('ZREM', f[2], id)
  return f[13]
end
