-- KEYS[1] grants hash, and for a self-registered client KEYS[2] its registration and KEYS[3]
-- the pending registrations; ARGV field, grant JSON, max active grants, hash TTL ms, and for a
-- self-registered client its registration handle.
-- Prunes expired grants, refuses at the cap (or a registration that expired before consent),
-- inserts, and restarts the hash TTL; a registration is then kept as long as this grant, the
-- newest, and is no longer pending.
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
if #KEYS == 3 and redis.call('EXISTS', KEYS[2]) == 0 then
  return {'unregistered'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
if #KEYS == 3 then
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('ZREM', KEYS[3], ARGV[5])
end
return {'ok'}
