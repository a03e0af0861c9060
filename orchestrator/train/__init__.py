"""The maintenance train feature: its spec, its messages and its client calls."""
