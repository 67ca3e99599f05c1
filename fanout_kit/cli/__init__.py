"""fanout: the kit's command line (local engine demo, and operations against a deployed stack)."""
