-- KEYS[1] grants hash; ARGV field, grant JSON, max active grants, hash TTL ms.
-- Prunes expired grants, refuses at the cap, inserts, and restarts the hash TTL.
local live = prune_grants(KEYS[1], {})
if not live then
  return {'corrupt'}
end
local active = #live / 2
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {'corrupt'}
end
if active >= tonumber(ARGV[3]) then
  return {'full'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok'}
