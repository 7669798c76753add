-- Sign-in: consume the old session KEYS[1] (only if it still holds ARGV[1]) and create the new
-- one KEYS[2] = ARGV[2] with a TTL of ARGV[3] ms, in one step.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {'gone'}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'corrupt'}
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return {'ok'}
