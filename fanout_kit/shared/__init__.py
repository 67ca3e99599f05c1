"""What the three patterns share: the batch status store and UpdateFinalStatus, the dead-letter
queue, alarms, settings, function, asset and layer helpers, state builders and rules, and the
runtime code every kit handler uses. Nothing is imported here: a handler's code asset holds this file."""
