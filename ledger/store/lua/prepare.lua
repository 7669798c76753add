-- ledger_prepare: seq 1 of a new send plus its private payload.
-- KEYS: stream, payload, index, unclaimed, meta
-- ARGV: pid, e, h, eid, m, payload, payload_ttl_ms, retention_ms, expires_ms, floor
local stream, payload_key, index_key, unclaimed, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4],
  KEYS[5]
local pid, e, h, eid, m = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local payload, payload_ttl = ARGV[6], tonumber(ARGV[7])
local retention, expires, floor = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])

if redis.call('EXISTS', stream) == 1 then
  local first = read_entries(stream)[1]
  if first and first.seq == 1 and first.eid == eid then
    return {'duplicate', first.h}
  end
  return {'exists'}
end
if redis.call('EXISTS', payload_key) == 1 then
  return {'exists'}
end

local event, why = check_new(e, pid, 1, nil, eid, 'prepared')
if not event then
  return {'malformed', why}
end
if event.data.expires_ms ~= expires or payload_ttl <= 0 then
  return {'malformed', 'expiry arguments disagree with e'}
end

if halted(meta, floor) then
  return {'halted'}
end

local now = now_ms()
add_entry(stream, 1, e, h, 'prepared', eid, now, m)
redis.call('SET', payload_key, payload, 'PX', int(payload_ttl), 'NX')
local archive_ms = archived_upto(meta)
keep_stream(stream, retention, archive_ms)
redis.call('ZADD', unclaimed, int(expires), pid)
add_index(index_key, pid, 1, 'prepared', h, now, retention, archive_ms)
return {'ok', int(now), tick(meta)}
