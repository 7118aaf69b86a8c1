"""Files found relative to the checkout: the default data folder sits beside the repository
(``../shared/benchdata``), and the code version comes from the checkout's git."""
import pathlib

from countermem_jax.protocol import provenance
from countermem_jax.runtime import paths

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_default_data_folder_sits_beside_the_checkout(monkeypatch):
    monkeypatch.delenv("COUNTERMEM_DATA", raising=False)
    assert paths.data_root() == (ROOT.parent / "shared" / "benchdata").resolve()


def test_the_data_folder_can_be_set_by_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("COUNTERMEM_DATA", str(tmp_path))
    assert paths.data_root() == tmp_path.resolve()


def test_the_code_version_is_read_from_the_checkout():
    if not (ROOT / ".git").exists():
        return   # an installed copy without git: "unknown" or the package version
    assert provenance.code_version() not in (provenance.UNKNOWN, "")
