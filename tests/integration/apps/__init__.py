"""Apps the integration tests run with `splitstate run` (importable as modules)."""
