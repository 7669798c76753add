-- Rotate a refresh token in one step.
-- KEYS: old refresh key, new refresh key, family key, grants hash, the grant's token budget.
-- ARGV: old refresh JSON as read, new refresh JSON, SHA-256 of the old token, SHA-256 of the new
--   token, client_id, resource, subject, requested scopes (space-separated, '' = the grant's),
--   rotation cap, budget limit, budget window ms.
-- Answers: {'ok', grant JSON}, {'invalid'}, {'reused'}, {'scope'}, {'cap'},
--   {'limited', retry ms}, {'corrupt'}.
local raw = redis.call('GET', KEYS[1])
if not raw or raw ~= ARGV[1] then
  return {'invalid'}
end
local record = decode(raw)
if not record or not is_int(record.expires_unix) then
  return {'corrupt'}
end
local now = now_s()
if record.client_id ~= ARGV[5] or record.resource ~= ARGV[6] or record.subject ~= ARGV[7]
    or record.expires_unix <= now then
  return {'invalid'}
end

local family_raw = redis.call('GET', KEYS[3])
if not family_raw then
  return {'invalid'}
end
local family = decode(family_raw)
if not family or not is_int(family.rotations) or family.grant ~= record.grant then
  return {'corrupt'}
end

-- Revocation ends the family and deletes the grant: every later use of any of its tokens,
-- and every access token carrying its ID, is refused.
local function revoke()
  family.state = 'revoked'
  redis.call('SET', KEYS[3], cjson.encode(family), 'KEEPTTL')
  redis.call('HDEL', KEYS[4], record.grant)
end

if family.state ~= 'active' then
  redis.call('HDEL', KEYS[4], record.grant)
  return {'invalid'}
end
-- Checked before the budget: a replayed token revokes even when the budget is spent.
if family.current ~= ARGV[3] then
  revoke()
  return {'reused'}
end

local grant_raw = redis.call('HGET', KEYS[4], record.grant)
if not grant_raw then
  revoke()
  return {'invalid'}
end
local grant = decode(grant_raw)
if not grant or not is_int(grant.expires_unix) or type(grant.scopes) ~= 'table' then
  return {'corrupt'}
end
if grant.client_id ~= record.client_id or grant.resource ~= record.resource
    or grant.subject ~= record.subject or grant.expires_unix ~= record.expires_unix then
  return {'corrupt'}
end
if grant.expires_unix <= now then
  revoke()
  return {'invalid'}
end

local granted = {}
for _, scope in ipairs(grant.scopes) do
  granted[scope] = true
end
for scope in string.gmatch(ARGV[8], '%S+') do
  if not granted[scope] then
    revoke()
    return {'scope'}
  end
end
if family.rotations >= tonumber(ARGV[9]) then
  revoke()
  return {'cap'}
end

local budget = spend(KEYS[5], tonumber(ARGV[10]), tonumber(ARGV[11]))
if budget[1] ~= 'ok' then
  return budget
end

if redis.call('EXISTS', KEYS[2]) == 1 then
  return {'corrupt'}
end
-- The new token lives exactly as long as the old one: rotation never moves the deadline.
redis.call('SET', KEYS[2], ARGV[2], 'PXAT', int(record.expires_unix * 1000))
family.current = ARGV[4]
family.rotations = family.rotations + 1
redis.call('SET', KEYS[3], cjson.encode(family), 'KEEPTTL')
return {'ok', grant_raw}
