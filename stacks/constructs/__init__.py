"""Constructs, one concern each: functions, dead-letter queue, status store, state machine."""
