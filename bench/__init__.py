"""Benchmarks: each script prints a table; run them with .venv/bin/python bench/NAME.py."""
