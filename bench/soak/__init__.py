"""``python -m bench.soak`` (``make soak``): mixed traffic, judged (docs/performance.md)."""
