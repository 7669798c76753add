-- Shared prelude of the OAuth store scripts (ledger/store/lua_scripts.py puts it first).
-- Every expiry decision taken inside a script uses the Redis server clock (TIME), so all
-- instances of the service agree on it whatever their own clocks say.

if redis.replicate_commands then
  -- Redis 6.2 (the embedded store) needs this for writes after TIME; 7.x always replicates effects.
  redis.replicate_commands()
end

local function now_s()
  return tonumber(redis.call('TIME')[1])
end

-- Integers go to Redis as plain digits ('%d'), never in exponent form.
local function int(n)
  return string.format('%d', n)
end

-- A version-1 record, or nil when the stored JSON is malformed (the caller fails closed).
local function decode(raw)
  local ok, value = pcall(cjson.decode, raw)
  if not ok or type(value) ~= 'table' or value.v ~= 1 then
    return nil
  end
  return value
end

local function is_int(value)
  return type(value) == 'number' and value == math.floor(value) and value >= 0
end

-- Fixed-window budget: refuse at the limit with the window's remaining milliseconds, else
-- count one use. A counter that is not a whole number, or has no expiry, is corrupt.
local function spend(key, limit, window_ms)
  local current = redis.call('GET', key)
  if current then
    local count = tonumber(current)
    local ttl = redis.call('PTTL', key)
    if not is_int(count) or tostring(count) ~= current or ttl < 0 then
      return {'corrupt'}
    end
    if count >= limit then
      return {'limited', ttl}
    end
  end
  if redis.call('INCR', key) == 1 then
    redis.call('PEXPIRE', key, window_ms)
  end
  return {'ok'}
end

-- Prune the expired grants of the grants hash `key` and append the live ones to `out` as
-- field, JSON, field, JSON, ...; return `out`, or nil for a malformed grant (the caller fails
-- closed; the grants pruned before it stay pruned).
local function prune_grants(key, out)
  local now = now_s()
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local grant = decode(all[i + 1])
    if not grant or not is_int(grant.expires_unix) then
      return nil
    end
    if grant.expires_unix <= now then
      redis.call('HDEL', key, all[i])
    else
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
  return out
end
