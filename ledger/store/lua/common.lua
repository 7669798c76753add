-- Shared prelude of the send-ledger scripts. ledger/store/scripts.py replaces
-- the marker line below with the lifecycle tables rendered from ledger/lifecycle.py.
--@LIFECYCLE@

if redis.replicate_commands then
  -- Redis 6.2 needs this for writes after TIME; 7.x always replicates effects.
  redis.replicate_commands()
end

local MAX_ENTRIES = 128

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Lua numbers are doubles; every integer we handle is < 2^53, and '%d' prints it exactly (Redis
-- builds Lua with a 64-bit LUA_INTFRM_T). '%.0f' does too, but glibc's exact float printing
-- cost 1.5-2.5 µs per script call (bench/ledger_core.py: EVALSHA 28-31 -> 26 µs).
local function int(n)
  return string.format('%d', n)
end

-- One bounded XRANGE, each entry parsed once into {seq, t, eid, h, e, srv_ms}. An entry whose
-- ID is not `0-<n>` gets seq nil (the stream is then corrupt).
local function read_entries(key)
  local raw = redis.call('XRANGE', key, '-', '+', 'COUNT', MAX_ENTRIES + 1)
  local entries = {}
  for i = 1, #raw do
    local item = {}
    local kv = raw[i][2]
    for j = 1, #kv, 2 do
      item[kv[j]] = kv[j + 1]
    end
    local ms, seq = string.match(raw[i][1], '^(%d+)-(%d+)$')
    if ms == '0' then
      item.seq = tonumber(seq)
    end
    entries[i] = item
  end
  return entries
end

local function decode(e)
  local ok, value = pcall(cjson.decode, e or '')
  if not ok or type(value) ~= 'table' or type(value.data) ~= 'table' then
    return nil
  end
  return value
end

-- Fold the lifecycle state from the `t` fields alone; nil when a stored transition is invalid.
local function fold(entries)
  local state = 'NONE'
  for i = 1, #entries do
    local t = entries[i].t
    if not ANNOTATIONS[t] then
      state = NEXT[state .. '|' .. tostring(t)]
      if not state then
        return nil
      end
    end
  end
  return state
end

local function find(entries, t)
  for i = 1, #entries do
    if entries[i].t == t then
      return entries[i]
    end
  end
  return nil
end

-- The new event's envelope must continue the chain exactly where the caller said it would.
-- (prev is nil for seq 1: Lua has no SHA-256, so the writer alone vouches for the genesis.)
local function check_new(e, pid, seq, prev, eid, t)
  local event = decode(e)
  if not event then
    return nil, 'e is not an event'
  end
  if event.pid ~= pid or event.seq ~= seq or (prev ~= nil and event.prev ~= prev)
      or event.eid ~= eid or event.type ~= t then
    return nil, 'e does not continue the chain'
  end
  return event, nil
end

local function add_entry(key, seq, e, h, t, eid, now, m)
  if m ~= '' then
    redis.call('XADD', key, '0-' .. int(seq), 'e', e, 'h', h, 't', t, 'eid', eid,
      'srv_ms', int(now), 'm', m)
  else
    redis.call('XADD', key, '0-' .. int(seq), 'e', e, 'h', h, 't', t, 'eid', eid,
      'srv_ms', int(now))
  end
end

-- The rollback guard. `meta` holds `clock`, advanced by every lifecycle event, and `halt`, set
-- when the store is found behind a clock some process saw and kept outside Redis (`floor`):
-- the store went back in time. A person clears `halt` (angelos ledger acknowledge-rollback).
local function halted(meta, floor)
  local clock = tonumber(redis.call('HGET', meta, 'clock') or '0')
  if clock < floor then
    if redis.call('HEXISTS', meta, 'halt') == 0 then
      redis.call('HSET', meta, 'halt', int(now_ms()) .. ' ' .. int(clock) .. ' ' .. int(floor))
    end
    redis.call('HSET', meta, 'clock', int(floor))
    return true
  end
  return redis.call('HEXISTS', meta, 'halt') == 1
end

local function tick(meta)
  return redis.call('HINCRBY', meta, 'clock', 1)
end

-- The archive's position (`archive_pos` in meta, an index entry ID), or nil when no archive
-- was started. While an archive exists nothing unarchived may expire: streams lose their TTL
-- on each append (the archiver's script sets it again once it holds the stream's last event)
-- and the index is never trimmed past the position.
local function archived_upto(meta)
  local pos = redis.call('HGET', meta, 'archive_pos')
  if not pos then
    return nil
  end
  return tonumber(string.match(pos, '^(%d+)-')) or 0
end

local function keep_stream(stream, retention_ms, archive_ms)
  if archive_ms then
    redis.call('PERSIST', stream)
  else
    redis.call('PEXPIRE', stream, int(retention_ms))
  end
end

local function add_index(key, pid, seq, t, h, now, retention_ms, archive_ms)
  local floor = math.max(now - retention_ms, 0)
  if archive_ms and archive_ms < floor then
    floor = archive_ms
  end
  redis.call('XADD', key, 'MINID', '~', int(floor), '*',
    'pid', pid, 'seq', int(seq), 't', t, 'h', h)
end
