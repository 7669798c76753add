"""Read-only audits of the ledger: the per-stream checks, verify, show, list, export, replay."""
