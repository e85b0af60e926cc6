"""Benchmarks of Nimbus (docs/performance.md): ``make bench``; ``.venv/bin/python -m bench --help``."""
