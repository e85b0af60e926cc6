"""Benchmarks of Nimbus: AWS calls per request on warm functions, and handler import times.

Run with ``make bench`` (``.venv/bin/python -m bench``); ``--help`` lists the options.
"""
