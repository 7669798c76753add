"""The only code that speaks Redis: keys, connection, the Lua scripts and their batching, the
store's reads and writes, bulk reads for audits and recovery, the dispatcher lease, the
embedded Redis and the startup self-check."""
