"""Test doubles: stand-ins for what cannot run in a test or a speed benchmark (paper §4 setup)."""
