-- ledger_acknowledge: a person has handled a recorded rollback; sending may resume.
-- KEYS: meta
-- ARGV: the halt record the person acknowledged (a newer detection is not cleared)
local meta = KEYS[1]
local current = redis.call('HGET', meta, 'halt')
if not current then
  return {'none'}
end
if current ~= ARGV[1] then
  return {'changed', current}
end
redis.call('HDEL', meta, 'halt')
redis.call('HSET', meta, 'rollback_acknowledged', int(now_ms()) .. ' ' .. current)
return {'acknowledged'}
