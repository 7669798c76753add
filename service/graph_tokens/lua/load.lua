-- ARGV[1]: the largest record in bytes. Reads the stored state in one step.
return stored_state(tonumber(ARGV[1]))
