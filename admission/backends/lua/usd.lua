-- $ accounts (issue 51.3, admission/usd.py; mirrored by backends/usd_memory.py). KEYS: per account its
-- hash (spent, held, 'h:<rid>' per open hold) then its expiry zset, all under one tenant's tag.
-- ARGV: op ('hold' | 'settle'), rid, $ ('' in a settle: the hold's own estimate), ttl_s, key_ttl_s,
-- then per account its limit (hold).
local op, rid, amount = ARGV[1], ARGV[2], ARGV[3]
local now = clock()
local n = #KEYS / 2
local field = 'h:' .. rid

-- Holds past their expiry are charged at their estimate (their reservation expired); at most 64 a
-- call (the rest stay held, which counts the same against the limit, until the next call).
local function lapse(h, z)
  local due = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 64)
  for _, r in ipairs(due) do
    local v = redis.call('HGET', h, 'h:' .. r)
    if v then
      redis.call('HINCRBYFLOAT', h, 'spent', v)
      redis.call('HINCRBYFLOAT', h, 'held', -tonumber(v))
      redis.call('HDEL', h, 'h:' .. r)
    end
    redis.call('ZREM', z, r)
  end
end

local function left(h, limit)
  local v = redis.call('HMGET', h, 'spent', 'held')
  return limit - (tonumber(v[1]) or 0) - math.max(0, tonumber(v[2]) or 0)
end

for i = 1, n do lapse(KEYS[2 * i - 1], KEYS[2 * i]) end

if op == 'hold' then
  local usd = tonumber(amount)
  local lowest = math.huge
  local lefts = {}
  for i = 1, n do
    lefts[i] = left(KEYS[2 * i - 1], tonumber(ARGV[5 + i]))
    if lefts[i] < lowest then lowest = lefts[i] end
  end
  if redis.call('HEXISTS', KEYS[1], field) == 1 then
    return {'A', num(lowest), '1'}
  end
  if lowest - usd < 0 then
    return {'R', num(lowest), '0'}
  end
  local exp = now + tonumber(ARGV[4])
  local kttl = tonumber(ARGV[5])
  for i = 1, n do
    local h, z = KEYS[2 * i - 1], KEYS[2 * i]
    redis.call('HSET', h, field, amount)
    redis.call('HINCRBYFLOAT', h, 'held', amount)
    redis.call('ZADD', z, exp, rid)
    redis.call('EXPIRE', h, kttl)
    redis.call('EXPIRE', z, kttl)
  end
  return {'A', num(lowest - usd), '0'}
end

-- settle: charge the hold `amount` ('': its own estimate; '0': release it)
local found = 0
for i = 1, n do
  local h, z = KEYS[2 * i - 1], KEYS[2 * i]
  local v = redis.call('HGET', h, field)
  if v then
    local charge = v
    if amount ~= '' then charge = amount end
    redis.call('HINCRBYFLOAT', h, 'spent', charge)
    redis.call('HINCRBYFLOAT', h, 'held', -tonumber(v))
    redis.call('HDEL', h, field)
    redis.call('ZREM', z, rid)
    found = 1
  end
end
return found
