"""Development tools shared by tests and benchmarks (not used by the tasks)."""
