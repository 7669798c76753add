-- KEYS[1] grants hash. Prunes expired grants and returns {'ok', field, json, field, json, ...}.
local now = now_s()
local all = redis.call('HGETALL', KEYS[1])
local out = {'ok'}
for i = 1, #all, 2 do
  local grant = decode(all[i + 1])
  if not grant or not is_int(grant.expires_unix) then
    return {'corrupt'}
  end
  if grant.expires_unix <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
