"""Side-by-side benchmarks of Loom and its peers; run ``python -m benchmarks``."""
