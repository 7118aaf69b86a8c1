"""Shared fixtures: small real records and stores."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from helpers import make_record  # noqa: E402,F401

os.environ.setdefault("JAX_PLATFORMS", "cpu")


@pytest.fixture
def record_factory():
    return make_record
