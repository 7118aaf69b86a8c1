"""launch/system_packages.sh, run by the quickstart and by CI: what it does when it may not install
(not root), with the packages missing from PATH."""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "launch" / "system_packages.sh"


def _run(tmp_path, *args):
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "id").write_text("#!/bin/sh\necho 1000\n")   # not root: nothing may be installed
    (fake / "id").chmod(0o755)
    env = dict(os.environ, PATH=str(fake))                # no bwrap, no dafny on this PATH
    return subprocess.run(["/bin/bash", str(SCRIPT), *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_without_root_it_names_the_one_command_and_lets_the_quickstart_go_on(tmp_path):
    out = _run(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("System packages missing")
    assert "sudo apt-get install -y bubblewrap dafny" in out.stdout


def test_ci_fails_when_it_cannot_install_them(tmp_path):
    out = _run(tmp_path, "--require")
    assert out.returncode == 1
    assert "sudo apt-get install -y bubblewrap dafny" in out.stdout
