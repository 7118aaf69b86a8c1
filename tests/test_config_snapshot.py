"""Every config entry point resolves as it did before the values moved into ``configs/``
(``tests/config_snapshot.py``)."""
import json

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
    got = dict(resolved.get(key) or {})
    got.pop("settings", None)   # the paper settings a study's cells read, checked below
    assert got == EXPECTED[key]


def test_study_cells_take_the_paper_settings_of_configs_paper(resolved):
    """The settings a study config carries are configs/paper.py's, so a cell moved to another
    benchmark is configured as the snapshot recorded (the cells' entries above)."""
    paper = config_snapshot._load(config_snapshot.ROOT / "configs" / "paper.py")
    expected = paper.settings().to_dict()
    carried = [v["settings"] for k, v in resolved.items() if "settings" in v]
    assert carried and all(c == json.loads(json.dumps(expected)) for c in carried)
