"""The kit's three patterns, one folder each: its construct (``construct``), its state machine
definition (``definition``, where it has one), its Lambda handlers (``handlers/``) and the code
they share (the rest). Nothing is imported here: a handler's code asset holds this file."""
