-- The stored Graph refresh token: KEYS[1] is its record, KEYS[2] the record's marker
-- (`v1` once a record was written). Neither key ever has a TTL.

-- The stored state as {status[, record]}: 'empty' (neither key), 'corrupt' (one key without
-- the other, a marker other than v1, or a key of another type), 'oversize' (a record longer
-- than max_bytes, never read), or 'stored' with the record.
local function stored_state(max_bytes)
  local record_type = redis.call('TYPE', KEYS[1])['ok']
  local marker_type = redis.call('TYPE', KEYS[2])['ok']
  if record_type == 'none' and marker_type == 'none' then
    return {'empty'}
  end
  if record_type ~= 'string' or marker_type ~= 'string' then
    return {'corrupt'}
  end
  if redis.call('STRLEN', KEYS[2]) ~= 2 or redis.call('GET', KEYS[2]) ~= 'v1' then
    return {'corrupt'}
  end
  if redis.call('STRLEN', KEYS[1]) > max_bytes then
    return {'oversize'}
  end
  return {'stored', redis.call('GET', KEYS[1])}
end
