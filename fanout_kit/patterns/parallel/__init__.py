"""The Parallel pattern: a fixed set of child tasks (``ParallelFanOut``)."""
