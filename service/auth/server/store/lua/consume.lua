-- Redeem the authorization code KEYS[1] (KEYS[2] the grants hash) only while it holds exactly
-- ARGV[1], the record as validated: it becomes a marker naming its grant, kept as long as the
-- code would have lived, so of two racing exchanges one wins. A redeemed code presented again
-- (ARGV[1] '' when only reading) is a replay: the grant it made is deleted, which ends its
-- refresh family and every access token carrying its ID (OAuth 2.1 section 4.1.3).
-- Answers {'ok'} (redeemed now), {'gone'} (absent or other bytes), {'replayed'}, {'corrupt'}.
local raw = redis.call('GET', KEYS[1])
if not raw then
  return {'gone'}
end
local record = decode(raw)
if record and record.redeemed == true then
  if type(record.grant) ~= 'string' then
    return {'corrupt'}
  end
  redis.call('HDEL', KEYS[2], record.grant)
  return {'replayed'}
end
if ARGV[1] == '' or raw ~= ARGV[1] then
  return {'gone'}
end
if not record or type(record.grant) ~= 'string' then
  return {'corrupt'}
end
local marker = cjson.encode({v = 1, redeemed = true, grant = record.grant})
redis.call('SET', KEYS[1], marker, 'KEEPTTL')
return {'ok'}
