-- Start a refresh family for a grant.
-- KEYS: grants hash, new refresh key, new family key.
-- ARGV: grant field, client_id, resource, subject, refresh JSON, family JSON, deadline (unix s).
local now = now_s()
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {'invalid'}
end
local grant = decode(raw)
if not grant or not is_int(grant.expires_unix) then
  return {'corrupt'}
end
if grant.expires_unix <= now then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {'invalid'}
end
if grant.client_id ~= ARGV[2] or grant.resource ~= ARGV[3] or grant.subject ~= ARGV[4]
    or grant.expires_unix ~= tonumber(ARGV[7]) then
  return {'invalid'}
end
if redis.call('EXISTS', KEYS[2]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then
  return {'corrupt'}
end
local deadline_ms = int(grant.expires_unix * 1000)
redis.call('SET', KEYS[2], ARGV[5], 'PXAT', deadline_ms)
redis.call('SET', KEYS[3], ARGV[6], 'PXAT', deadline_ms)
return {'ok'}
