-- Replace KEYS[1] (keeping its expiry) only when it still holds exactly ARGV[1].
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
  return 1
end
return 0
