-- ledger_claim: the one-time claim.
-- KEYS: stream, payload, index, open, unclaimed, meta, rate (the sliding window of claims)
-- ARGV: pid, owner, confirmed_digest, expected_seq, expected_h, e, h, eid, m, retention_ms,
--       floor, grant (the grant binding, "" outside first-party mode), rate_count and
--       rate_window_ms (0 and 0: no send rate limit)
local stream, payload_key, index_key, open_key, unclaimed, meta = KEYS[1], KEYS[2], KEYS[3],
  KEYS[4], KEYS[5], KEYS[6]
local rate_key = KEYS[7]
local pid, owner, digest = ARGV[1], ARGV[2], ARGV[3]
local expected_seq, expected_h = tonumber(ARGV[4]), ARGV[5]
local e, h, eid, m, retention = ARGV[6], ARGV[7], ARGV[8], ARGV[9], tonumber(ARGV[10])
local floor = tonumber(ARGV[11])
local grant = ARGV[12] or ''
local rate_count, rate_window = tonumber(ARGV[13]) or 0, tonumber(ARGV[14]) or 0

local entries = read_entries(stream)
if #entries == 0 then
  return {'missing'}
end
if #entries > MAX_ENTRIES then
  return {'corrupt', 'stream too long'}
end
local prepared = decode(entries[1].e)
if entries[1].seq ~= 1 or entries[1].t ~= 'prepared' or not prepared or prepared.pid ~= pid then
  return {'corrupt', 'entry 1 is not the prepared event'}
end
if prepared.data.owner ~= owner or (prepared.data.grant or '') ~= grant then
  return {'missing'}
end
if prepared.data.digest ~= digest then
  return {'mismatch'}
end
local state = fold(entries)
if not state then
  return {'corrupt', 'invalid stored transition'}
end
local head = entries[#entries]
for i = 2, #entries do
  if entries[i].eid == eid then
    -- Our own claim already landed and its reply was lost: the payload is gone for good.
    return {'ack_lost', int(head.seq or 0), head.h, state}
  end
end
-- An `expired` event is not a consumption: it answers `expired` below (time has passed too).
if not UNCLAIMED[state] and state ~= 'EXPIRED' then
  return {'existing', int(head.seq or 0), head.h, state}
end
local now = now_ms()
if state == 'EXPIRED' or now >= prepared.data.expires_ms then
  return {'expired', int(now)}
end
if head.seq ~= expected_seq or head.h ~= expected_h then
  return {'conflict', int(head.seq or 0), head.h, state}
end
if halted(meta, floor) then
  -- The store went back in time: this preparation may have been claimed and sent before.
  return {'halted'}
end
if NEED[state .. '|claimed'] == 'unapproved' and prepared.data.approval then
  -- The approval this preparation requires (frozen at prepare) was never recorded.
  return {'approval_required'}
end
local payload = redis.call('GET', payload_key)
if not payload then
  return {'payload_missing'}
end
local event, why = check_new(e, pid, expected_seq + 1, expected_h, eid, 'claimed')
if not event then
  return {'malformed', why}
end
if event.data.confirmed_digest ~= digest then
  return {'malformed', 'e confirms another digest'}
end
if rate_count > 0 then
  -- A sliding window of the claims themselves: checked and counted in this one step, so no
  -- race of confirms passes it. A refused claim consumes nothing.
  redis.call('ZREMRANGEBYSCORE', rate_key, '-inf', int(now - rate_window))
  if redis.call('ZCARD', rate_key) >= rate_count then
    local oldest = redis.call('ZRANGE', rate_key, 0, 0, 'WITHSCORES')
    return {'rate_limited', int(tonumber(oldest[2]) + rate_window)}
  end
  redis.call('ZADD', rate_key, int(now), pid)
  redis.call('PEXPIRE', rate_key, int(rate_window))
end

local seq = expected_seq + 1
add_entry(stream, seq, e, h, 'claimed', eid, now, m)
redis.call('DEL', payload_key)
redis.call('ZREM', unclaimed, pid)
redis.call('ZADD', open_key, int(now), 'd:' .. pid)
local archive_ms = archived_upto(meta)
add_index(index_key, pid, seq, 'claimed', h, now, retention, archive_ms)
keep_stream(stream, retention, archive_ms)
return {'claimed', payload, int(now), tick(meta)}
