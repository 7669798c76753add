-- KEYS[1] registration, KEYS[2] pending registrations (sorted set of handles by expiry, ms);
-- ARGV handle, record JSON, pending lifetime ms, max pending registrations.
-- Prunes expired pending entries, refuses at the cap, stores the record for the pending
-- lifetime (SET NX: a client ID is never reused) and counts it as pending.
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', int(now_ms))
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {'full'}
end
if not redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3], 'NX') then
  return {'corrupt'}
end
redis.call('ZADD', KEYS[2], int(now_ms + tonumber(ARGV[3])), ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return {'ok'}
