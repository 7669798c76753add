-- KEYS[1] rate counter; ARGV limit, window_ms.
return spend(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
