-- Spend several fixed-window budgets together, all or nothing: KEYS the counters, ARGV a limit
-- and a window in ms per key. When any counter is at its limit nothing is counted and the
-- longest remaining window among those is answered, so a refused request creates no counter.
local wait = -1
for i = 1, #KEYS do
  local current = redis.call('GET', KEYS[i])
  if current then
    local count = tonumber(current)
    local ttl = redis.call('PTTL', KEYS[i])
    if not is_int(count) or tostring(count) ~= current or ttl < 0 then
      return {'corrupt'}
    end
    if count >= tonumber(ARGV[2 * i - 1]) and ttl > wait then
      wait = ttl
    end
  end
end
if wait >= 0 then
  return {'limited', wait}
end
for i = 1, #KEYS do
  if redis.call('INCR', KEYS[i]) == 1 then
    redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
  end
end
return {'ok'}
