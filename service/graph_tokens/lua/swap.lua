-- ARGV[1]: the largest record in bytes; ARGV[2]: the exact record the caller last saw ('' when
-- it saw nothing stored); ARGV[3]: the new record. Writes the new record and the marker only
-- when the store still holds exactly what the caller saw; otherwise answers what it holds:
-- the winner's record, 'vanished' when it saw a record that is gone, or the state's fault.
local state = stored_state(tonumber(ARGV[1]))
local expected = ARGV[2]
local unchanged = (expected == '' and state[1] == 'empty')
  or (expected ~= '' and state[1] == 'stored' and state[2] == expected)
if unchanged then
  redis.call('SET', KEYS[1], ARGV[3])
  redis.call('SET', KEYS[2], 'v1')
  return {'swapped'}
end
if state[1] == 'empty' then
  return {'vanished'}
end
return state
