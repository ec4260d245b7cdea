"""The deterministic simulation of splitstate (see tests/sim/driver.py and the README)."""
