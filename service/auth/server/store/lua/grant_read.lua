-- KEYS[1] grants hash; ARGV[1] field. Returns {'ok', json}, {'missing'} (absent or expired, and
-- then pruned) or {'corrupt'}.
local raw = redis.call('HGET', KEYS[1], ARGV[1])
if not raw then
  return {'missing'}
end
local grant = decode(raw)
if not grant or not is_int(grant.expires_unix) then
  return {'corrupt'}
end
if grant.expires_unix <= now_s() then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {'missing'}
end
return {'ok', raw}
