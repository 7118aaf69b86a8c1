"""The security catalogues (``docs/world_models.md#threat-model``): hostile actions against every
checker (``hostile``), paths no binary can use (``hostile_paths``), broken replies of a served
model (``hostile_replies``) and 1 MB inputs to every parser (``bounded_inputs``). Each prints one
line per case and a last ``result: {json}`` line; ``tests/test_hostile_checkers.py`` and
``tests/test_bad_paths.py`` run the same cases."""
