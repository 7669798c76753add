-- ledger_append: compare-and-append of every event other than prepared and claimed.
-- KEYS: stream, payload, index, open, unclaimed, lease (of the claim's dispatcher, or any),
--       meta, evidence
-- ARGV: pid, expected_seq, expected_h, type, e, h, eid, m, retention_ms, annotation_cap,
--       grace_ms, floor
local stream, payload_key, index_key, open_key, unclaimed, lease, meta = KEYS[1], KEYS[2],
  KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local evidence_key = KEYS[8]
local pid, expected_seq, expected_h, t = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local e, h, eid, m = ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local retention, cap, grace = tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11])
local floor = tonumber(ARGV[12])

local entries = read_entries(stream)
if #entries == 0 then
  return {'missing'}
end
if #entries > MAX_ENTRIES then
  return {'corrupt', 'stream too long'}
end
local state = fold(entries)
if not state then
  return {'corrupt', 'invalid stored transition'}
end
local head = entries[#entries]
local annotations = 0
for i = 1, #entries do
  if entries[i].eid == eid then
    -- A retry whose first reply was lost: report where it landed and where the head is now.
    return {'duplicate', int(entries[i].seq or 0), int(head.seq or 0), head.h, state}
  end
  if ANNOTATIONS[entries[i].t] then
    annotations = annotations + 1
  end
end
if head.seq ~= expected_seq or head.h ~= expected_h then
  return {'conflict', int(head.seq or 0), head.h, state}
end
local event, why = check_new(e, pid, expected_seq + 1, expected_h, eid, t)
if not event then
  return {'malformed', why}
end

local now = now_ms()
local to = state  -- the state after this event (an annotation leaves it)
if t == 'prepared' or t == 'claimed' then
  -- Only ledger_prepare and ledger_claim may write these (owner, digest and expiry checks, I1).
  return {'invalid_transition', state}
end
if ANNOTATIONS[t] then
  if annotations >= cap then
    return {'annotation_cap'}
  end
else
  local key = state .. '|' .. t
  if not NEXT[key] or not guards_hold(key, event.data) then
    return {'invalid_transition', state}
  end
  to = NEXT[key]
  local need = NEED[key]
  local recovery_actor = type(event.actor) == 'string'
    and string.sub(event.actor, 1, 9) == 'recovery:'
  if need == 'deadline' then
    local prepared = decode(entries[1].e)
    if not prepared or now < prepared.data.expires_ms then
      return {'too_early', int(now)}
    end
  elseif need == 'append_sent' then
    local claimed = decode(find(entries, 'claimed').e)
    if not claimed or claimed.data.append_sent ~= true then
      return {'invalid_transition', state}
    end
  elseif (need == 'recovery' or need == 'halted') and not recovery_actor then
    return {'invalid_transition', state}
  elseif need == 'operator' and string.sub(tostring(event.actor), 1, 9) ~= 'operator:' then
    return {'invalid_transition', state}
  elseif need == 'evidence' and not recovery_actor
      and string.sub(tostring(event.actor), 1, 9) ~= 'operator:' then
    return {'invalid_transition', state}
  elseif need == 'approval' then
    -- Only the kind of approval the preparation requires (frozen at prepare), from the service.
    local prepared = decode(entries[1].e)
    if not prepared or not ACCEPTS[tostring(prepared.data.approval) .. '|'
        .. tostring(event.data.mode)] or string.sub(tostring(event.actor), 1, 4) ~= 'api:' then
      return {'invalid_transition', state}
    end
  end
  local halt = halted(meta, floor)
  if need == 'halted' and not halt then
    return {'not_halted'}
  end
  if halt and HALT_BLOCKED[t] then
    return {'halted'}
  end
  if need == 'recovery' or (t == 'sent_filing_failed' and recovery_actor) then
    -- Recovery may only close what a dead dispatcher left behind, and only after the grace.
    local claimed_entry = find(entries, 'claimed')
    local claimed = decode(claimed_entry.e)
    local suffix = 's:' .. pid
    local prefix = string.sub(stream, 1, #stream - #suffix)
    if string.sub(stream, #stream - #suffix + 1) ~= suffix or not claimed
        or lease ~= prefix .. 'lease:' .. tostring(claimed.data.dispatcher_id) then
      return {'malformed', 'the lease key is not the claim dispatcher lease'}
    end
    if redis.call('EXISTS', lease) == 1 then
      return {'lease_alive'}
    end
    local since = tonumber(claimed_entry.srv_ms)
    if t == 'sent_filing_failed' then
      since = tonumber(find(entries, 'sent_filing_started').srv_ms)
    end
    -- The grace in force at the claim binds too: a later, shorter setting never cuts it.
    local recorded = tonumber(claimed.data.recovery_grace_ms)
    if recorded and recorded > grace then
      grace = recorded
    end
    if now - since < grace then
      return {'too_early', int(now)}
    end
  end
end

local seq = expected_seq + 1
add_entry(stream, seq, e, h, t, eid, now, m)
if t == 'rollback_quarantined' then
  -- It may close an unclaimed preparation: its payload must never be claimed.
  redis.call('DEL', payload_key)
  redis.call('ZREM', unclaimed, pid)
end
if DISPATCH_TERMINAL[t] then
  redis.call('ZREM', open_key, 'd:' .. pid)
elseif t == 'sent_filing_started' then
  redis.call('ZADD', open_key, int(now), 'f:' .. pid)
elseif FILING_RESULT[t] then
  redis.call('ZREM', open_key, 'f:' .. pid)
elseif t == 'expired' then
  redis.call('DEL', payload_key)
  redis.call('ZREM', unclaimed, pid)
end
-- Recovery's work list of unknown sends to search for evidence: joined in the same step that
-- makes a send unknown, left when the evidence is recorded (recovery also drops a member
-- once its searches are over).
if AWAITS_EVIDENCE[to] and not AWAITS_EVIDENCE[state] then
  redis.call('ZADD', evidence_key, int(now), pid)
elseif AWAITS_EVIDENCE[state] and not AWAITS_EVIDENCE[to] then
  redis.call('ZREM', evidence_key, pid)
end
local archive_ms = archived_upto(meta)
add_index(index_key, pid, seq, t, h, now, retention, archive_ms)
local clock = 0
if not ANNOTATIONS[t] then
  keep_stream(stream, retention, archive_ms)
  clock = tick(meta)
elseif archive_ms then
  redis.call('PERSIST', stream)  -- an unarchived annotation must not expire either
end
return {'appended', int(seq), int(now), clock}
