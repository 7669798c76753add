-- ledger_archive: the archiver's position, lease and stream expiry, kept beside the ledger.
-- KEYS: meta, archive lease, then (advance) the stream of each send named in ARGV
-- ARGV: op, token, ... (per op below)
local meta, lease = KEYS[1], KEYS[2]
local op, token = ARGV[1], ARGV[2]

local function holds_lease()
  return redis.call('GET', lease) == token
end

if op == 'lease' then
  -- ARGV: op, token, lease_ms, previous. Take or renew the one archiver's lease; `previous` is
  -- the token a dead archiver of the same directory held (its directory lock proves it dead).
  local holder = redis.call('GET', lease)
  if holder and holder ~= token and holder ~= ARGV[4] then
    return {'held', redis.call('PTTL', lease)}
  end
  redis.call('SET', lease, token, 'PX', ARGV[3])
  return {'ok'}
end

if op == 'free' then
  if holds_lease() then
    redis.call('DEL', lease)
  end
  return {'ok'}
end

if not holds_lease() then
  return {'lost_lease'}
end

if op == 'enroll' then
  -- ARGV: op, token, a fresh store ID (kept only when the ledger has none yet).
  -- Start (or find) the archive's position; from here on nothing unarchived expires.
  redis.call('HSETNX', meta, 'store_id', ARGV[3])
  redis.call('HSETNX', meta, 'archive_pos', '0-0')
  redis.call('HSETNX', meta, 'archive_n', '0')
  local got = redis.call('HMGET', meta, 'archive_pos', 'archive_n', 'store_id', 'retention_ms')
  return {'ok', got[1], got[2], got[3] or '', got[4] or ''}
end

if op == 'advance' then
  -- ARGV: op, token, expected_pos, new_pos, new_n, retention_ms, then one archived seq per
  -- stream in KEYS[3..]: a stream whose last entry is archived gets its retention back.
  local pos = redis.call('HGET', meta, 'archive_pos')
  if pos ~= ARGV[3] then
    return {'moved', pos or ''}
  end
  redis.call('HSET', meta, 'archive_pos', ARGV[4], 'archive_n', ARGV[5])
  local retention = tonumber(redis.call('HGET', meta, 'retention_ms') or ARGV[6]) or 0
  local settled = 0
  for i = 3, retention > 0 and #KEYS or 0 do
    local last = redis.call('XREVRANGE', KEYS[i], '+', '-', 'COUNT', 1)
    if #last == 1 and last[1][1] == '0-' .. ARGV[4 + i] then
      redis.call('PEXPIRE', KEYS[i], int(retention))
      settled = settled + 1
    end
  end
  return {'ok', settled}
end

if op == 'checkpoint' then
  -- ARGV: op, token, '<size> <ms>' of the checkpoint just written (for status reports).
  redis.call('HSET', meta, 'archive_cp', ARGV[3])
  return {'ok'}
end

if op == 'release' then
  -- ARGV: op, token. Stop keeping unarchived events: retention applies again from now.
  redis.call('HDEL', meta, 'archive_pos', 'archive_n', 'archive_cp')
  return {'ok'}
end

return {'malformed', 'unknown op'}
