-- Store a pending consent KEYS[2] = ARGV[3] (TTL ARGV[4] ms) and note it in the session KEYS[1]
-- (ARGV[1] -> ARGV[2], expiry kept), only while the session is unchanged.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {'gone'}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'corrupt'}
end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
return {'ok'}
