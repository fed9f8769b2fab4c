"""The placement problem: its data, rules and goals, how it is built from a trace, its incremental state and metrics."""
