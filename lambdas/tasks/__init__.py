"""Example child tasks. Replace them with your own: see README, "Add a task"."""
