-- KEYS[1] grants hash; ARGV field, grant JSON, max active grants, hash TTL ms.
-- Prunes expired grants, refuses at the cap, inserts, and restarts the hash TTL.
local now = now_s()
local all = redis.call('HGETALL', KEYS[1])
local active = 0
for i = 1, #all, 2 do
  local grant = decode(all[i + 1])
  if not grant or not is_int(grant.expires_unix) then
    return {'corrupt'}
  end
  if grant.expires_unix <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    active = active + 1
  end
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return {'corrupt'}
end
if active >= tonumber(ARGV[3]) then
  return {'full'}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {'ok'}
