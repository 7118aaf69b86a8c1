"""The README is the first five minutes: at most 250 lines, its first screen answers what a new
user needs before the quickstart, and every link of the README and docs/ leads to a file."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIRST_SCREEN = 60   # lines
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _readme() -> list[str]:
    return (ROOT / "README.md").read_text(encoding="utf-8").splitlines()


def test_readme_is_at_most_250_lines():
    assert len(_readme()) <= 250


def test_first_screen_says_where_the_data_goes_what_to_install_and_where_gpu_hosts_are():
    screen = "\n".join(_readme()[:FIRST_SCREEN])
    for needed in ("bash launch/quickstart_cpu.sh", "bash launch/test.sh",
                   "$COUNTERMEM_DATA", "../shared/benchdata",
                   "python -m countermem_jax.data fetch spider",
                   "bubblewrap", "python3-pytest", "python3-pytest-timeout", "dafny",
                   "docs/gpu_host.md", "--config.method=expel"):
        assert needed in screen, f"the README's first {FIRST_SCREEN} lines lack {needed!r}"


def _broken_links(files, root=ROOT) -> list[str]:
    broken = []
    for path in files:
        for target in _LINK.findall(path.read_text(encoding="utf-8")):
            if "://" in target:
                continue
            resolved = (path.parent / target).resolve()
            if not resolved.exists():
                broken.append(f"{path.relative_to(root)} -> {target}")
    return broken


def test_every_link_of_the_readme_and_docs_leads_to_a_file():
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert len(files) > 5
    assert not _broken_links(files)


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md) [gone](nowhere.md#x) [web](https://example.org)\n")
    assert _broken_links([page], root=tmp_path) == ["page.md -> nowhere.md"]
