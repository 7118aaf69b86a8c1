"""The benchmarks run without optional extras: a comparison that needs PyTorch is
skipped with a note naming the extra, and the script's other figures are still produced."""
import sys

from benchmarks import common


def test_missing_optional_module_is_skipped_with_the_extra_named(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch", None)   # makes `import torch` raise ImportError
    assert common.optional_module("torch", extra="bench", what="the PyTorch comparison") is None
    out = capsys.readouterr().out
    assert "torch is not installed, skipping the PyTorch comparison" in out
    assert 'pip install -e ".[bench]"' in out


def test_installed_optional_module_is_returned(capsys):
    assert common.optional_module("json", extra="none", what="nothing") is sys.modules["json"]
    assert capsys.readouterr().out == ""

