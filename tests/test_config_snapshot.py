"""Every config entry point resolves as it did before the values moved into ``configs/``
(``tests/config_snapshot.py``)."""
import pytest

import config_snapshot

EXPECTED = config_snapshot.read_fixture()


@pytest.fixture(scope="module")
def resolved():
    return config_snapshot.resolve_all()


def test_every_entry_point_is_in_the_snapshot(resolved):
    assert sorted(resolved) == sorted(EXPECTED)


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_entry_point_resolves_as_recorded(resolved, key):
    assert resolved.get(key) == EXPECTED[key]
