-- First enrollment: write the owner KEYS[1] = ARGV[1] and the persistent marker
-- KEYS[2] = ARGV[2] only when neither exists, so a stale bootstrap hash never enrolls again.
if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], ARGV[2])
return 1
