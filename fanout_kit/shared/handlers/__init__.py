"""Lambda handlers of the shared building blocks (UpdateFinalStatus, the execution-failure guard)."""
