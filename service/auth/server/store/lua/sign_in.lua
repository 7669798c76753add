-- Sign-in of a visitor that has nothing stored: create the signed-in session KEYS[1] = ARGV[1]
-- (TTL ARGV[2] ms) and, when KEYS[2] is given, the pending consent it notes, KEYS[2] = ARGV[3]
-- (TTL ARGV[4] ms), in one step. Fresh random keys never exist already.
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return {'corrupt'}
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if #KEYS == 2 then
  redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
end
return {'ok'}
