"""The completion ledger's Lambda handlers (consumers, failure recorders, sweeper)."""
