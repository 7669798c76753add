-- Delete KEYS[1] only when it still holds exactly ARGV[1]: of two racing consumers, one wins.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
