"""The send ledger: a pure core (lifecycle state machine, projection, hash chain) and three
rooms around it: store/ (Redis), dispatch/ (one send after its claim, and recovery) and
audit/ (verify, show, list, export, replay)."""
