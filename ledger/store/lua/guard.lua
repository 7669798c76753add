-- ledger_guard: compare the store's lifecycle clock with a witness kept outside Redis, and
-- record a rollback halt when the store is behind it (the store went back in time).
-- KEYS: meta
-- ARGV: floor (the highest clock the caller has seen; 0 when it keeps none)
local meta = KEYS[1]
local floor = tonumber(ARGV[1])
halted(meta, floor)
return {int(tonumber(redis.call('HGET', meta, 'clock') or '0')),
  redis.call('HGET', meta, 'halt') or ''}
