"""Example child tasks. Replace them with your own: see docs/getting-started.md, "Add a task to this repository's app"."""
