"""The signed, append-only archive of the send ledger."""
