-- Shared helpers, prepended to each operation script when it is loaded (one script per operation).
-- Time comes from Redis itself so every process agrees on it.
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
  redis.call('EXPIRE', key, 86400)
end

-- Settle one reservation past its TTL at its full estimate (it was debited in full at reserve).
local function expire_one(prefix, exp_key, id)
  local rk = prefix .. 'res:' .. id
  redis.call('ZREM', exp_key, id)
  local h = redis.call('HMGET', rk, 'st', 'ik', 'meta')
  if h[1] ~= 'open' then return nil end
  redis.call('HSET', rk, 'st', 'expired')
  redis.call('ZREM', h[2], id)
  return h[3]
end
