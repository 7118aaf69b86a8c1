"""Test doubles: stand-ins for what cannot run in a test or a speed benchmark (paper §4 setup).

``scripted_backbone`` answers prompts from a script instead of a model; ``openai_server`` is a
loopback OpenAI-format HTTP server for the real client. Only ``tests/``, ``benchmarks/``
and ``launch/`` may import this package: the library never depends on a test double
(``tests/test_import_structure.py`` checks it).
"""
