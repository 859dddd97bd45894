-- The second call of a spilled reserve (issue 36.1, docs/spillover.md): reserve.lua found the own
-- bucket short, charged nothing and left a hand-off marker under the request's record in the SOURCE
-- pool's slot; this script runs in the TARGET pool's slot. Every key below carries the target pool's
-- hash tag (admission.keys), so it charges the spill budget and the target pool atomically.
-- KEYS: 1 the spilled reservation's record (the request's record name + ':s'), 2 the spill budget
--       bucket, 3 the target pool's bucket, 4 the in-flight zset of this scope's spilled reservations,
--       5 the target pool's set of in-flight zsets (its sweep walks them), 6 the target's lend bucket
--       (touched only when ARGV 12 > 0).
-- ARGV: 1 record name, 2 cost, 3 meta, 4 the own throttle answer ('T|reason|retry[|limit]') the request
--       gets when the spill cannot take it, 5-6 spill rate/depth, 7-8 pool rate/depth, 9 the target's
--       reclaim margin, 10 degraded '1'/'0', 11-12 lend rate/depth (depth 0: no lend bucket), 13 ttl,
--       14 record ttl, 15 the record's static middle (ik … mo, see lib.lua).
-- Reply: {answer, 0 new | 1 replay | 2 replay of a settled one, in flight after an admit (else 0)}.
-- Mirrors base.spill_decide(). The record is written in the same format as reserve.lua's, so
-- complete.lua and expire.lua settle a spilled reservation as any other.
local prev = redis.call('GET', KEYS[1])
if prev then
  local head = string.sub(prev, 1, 5)
  if head == 'done\t' or head == 'expir' then return {answer_of(prev), 2, 0} end
  return {answer_of(prev), 1, 0}
end
local c = tonumber(ARGV[2])
local now, now_str = clock()
local pd = tonumber(ARGV[8])
local spill_l = level(KEYS[2], tonumber(ARGV[5]), tonumber(ARGV[6]), now)
local pool_l = level(KEYS[3], tonumber(ARGV[7]), pd, now)
local ld, lend_l = tonumber(ARGV[12]), nil
if ld > 0 then lend_l = level(KEYS[6], tonumber(ARGV[11]), ld, now) end
local ok = ARGV[10] ~= '1' and spill_l >= c and room_above_margin(pool_l, c, tonumber(ARGV[9]))
if ok and lend_l and lend_l < c then ok = false end
if not ok then
  -- The own throttle, replayed for its wait as reserve.lua's throttles are (at most an hour).
  local ra = tonumber(string.match(ARGV[4], '^T|[^|]+|(%d+)'))
  redis.call('SET', KEYS[1], ARGV[4], 'EX', math.max(1, math.min(3600, ra)))
  return {ARGV[4], 0, 0}
end
put(KEYS[2], spill_l - c, now_str)
put(KEYS[3], bounded(pool_l - c, pd), now_str)
if lend_l then put(KEYS[6], lend_l - c, now_str) end
local expires = num(now + tonumber(ARGV[13]))
local ans = 'A|' .. ARGV[1] .. '|' .. ARGV[2] .. '|spillover|' .. expires
local lent = ''  -- the lend bucket's charge, which complete.lua settles (lib.lua: the record's last field)
if lend_l then lent = '\t\t1|' .. KEYS[6] .. '|' .. ARGV[11] .. '|' .. ARGV[12] .. '|' .. ARGV[2] end
redis.call('SET', KEYS[1], 'open\t' .. ans .. '\t' .. ARGV[15] .. '\t' .. ARGV[2] .. '\t' .. ARGV[3] .. lent,
  'EX', ARGV[14])
redis.call('SADD', KEYS[5], KEYS[4])
-- Scored in whole microseconds, counted in either unit (lib.lua: US_MIN).
redis.call('ZADD', KEYS[4], string.format('%.0f', math.ceil(tonumber(expires) * 1e6)), ARGV[1])
local t_us = string.gsub(now_str, '%.', '')
return {ans, 0, live_in(KEYS[4], now_str, t_us, true)}
