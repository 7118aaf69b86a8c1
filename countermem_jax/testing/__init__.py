"""Test doubles: stand-ins for what cannot run in a test or a speed benchmark (paper §4 setup).

Only ``tests/``, ``benchmarks/`` and ``launch/`` import this package: the library never
depends on a test double (``tests/test_import_structure.py``).
"""
