"""Shared fixtures: small real records and stores."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # benchmarks/

from helpers import make_record  # noqa: E402,F401

os.environ.setdefault("JAX_PLATFORMS", "cpu")


@pytest.fixture
def record_factory():
    return make_record


@pytest.fixture(scope="session")
def benchdata():
    """The benchmark data folder, or a skip that says how to provide it."""
    from countermem_jax.runtime.paths import data_root
    root = data_root()
    if not root.exists():
        pytest.skip(f"benchmark data not found at {root}; set COUNTERMEM_DATA (see docs/data.md)")
    return root
