"""`python -m countermem_jax.data`: the downloader against a real HTTP server on 127.0.0.1 that
serves archives built here (checksums, atomic install, resumed and restarted downloads)."""
import hashlib
import http.server
import io
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import threading

import pytest

from countermem_jax.data import fetch, registry

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _tar(files: dict[str, bytes], top="repo-abc123") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class Server:
    """Serves ``self.files`` (path -> bytes); ``mode`` "cut" stops half way once, "norange"
    ignores Range headers. Every request's Range header is recorded."""

    def __init__(self):
        self.files, self.mode, self.ranges = {}, "", []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                data = outer.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                rng = self.headers.get("Range")
                outer.ranges.append(rng)
                start = int(rng.split("=")[1].rstrip("-")) if rng and outer.mode != "norange" else 0
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                if outer.mode == "cut":
                    outer.mode = ""
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.connection.shutdown(2)
                    return
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass   # the client stopped reading (a refused download): nothing to serve

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(monkeypatch):
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    s = Server()
    yield s
    s.close()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


FILES = {"data/questions.json": b'[{"q": 1}]', "data/db/a.sqlite": b"SQLite format 3\0" * 64,
         "data/extra.txt": b"not in the manifest", "src/code.py": b"print(1)"}


def _register(monkeypatch, server, files=FILES, manifest=None, nested=None):
    archive = _tar(files)
    server.files["/toy.tar.gz"] = archive
    recorded = manifest if manifest is not None else {
        "toy/questions.json": [_sha(files["data/questions.json"]), 10],
        "toy/db/a.sqlite": [_sha(files["data/db/a.sqlite"]), 1024]}
    source = {"repo": "o/toy", "commit": "abc123", "url": server.url + "/toy.tar.gz",
              "archive_sha256": None, "archive_sha256_note": "test",
              "include": [["data/", "toy/"]], "files": recorded}
    if nested:
        source["nested"] = nested
    entries = {"toy": {"title": "toy", "marker": "toy/questions.json", "sources": [source],
                       "known_bytes": 1034, "known_files": len(recorded)}}
    monkeypatch.setattr(registry, "load", lambda: entries)
    return archive


def test_fetch_verifies_installs_and_writes_a_receipt(server, monkeypatch, tmp_path):
    _register(monkeypatch, server)
    report = fetch.fetch("toy", tmp_path)
    assert report.verified == 2 and report.unverified == ["toy/extra.txt"]
    assert (tmp_path / "toy/db/a.sqlite").read_bytes() == FILES["data/db/a.sqlite"]
    assert not (tmp_path / "toy/code.py").exists() and not (tmp_path / "src").exists()
    receipt = json.loads((tmp_path / "toy" / fetch.RECEIPT).read_text())
    assert receipt["verified_files"] == 2 and receipt["unverified_files"] == ["toy/extra.txt"]
    assert fetch.verify("toy", tmp_path) == (2, [], [])
    (tmp_path / "toy/questions.json").write_text("[]")
    assert fetch.verify("toy", tmp_path)[1] == ["toy/questions.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".staging", ".old"))]


def test_checksum_mismatch_is_refused_and_nothing_is_half_installed(server, monkeypatch, tmp_path):
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "questions.json").write_text("previous copy")
    _register(monkeypatch, server, manifest={"toy/questions.json": ["0" * 64, 10],
                                              "toy/db/a.sqlite": [_sha(FILES["data/db/a.sqlite"]),
                                                                  1024]})
    with pytest.raises(fetch.ChecksumMismatch, match="sha256 mismatch: toy/questions.json"):
        fetch.fetch("toy", tmp_path)
    assert (tmp_path / "toy" / "questions.json").read_text() == "previous copy"
    assert sorted(p.name for p in (tmp_path / "toy").iterdir()) == ["questions.json"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".staging", ".old"))]
    assert not list((tmp_path / ".downloads").iterdir())      # the bad archive is not reused


def test_a_missing_recorded_file_is_refused(server, monkeypatch, tmp_path):
    manifest = {"toy/questions.json": [_sha(FILES["data/questions.json"]), 10],
                "toy/not_there.json": ["1" * 64, 3]}
    _register(monkeypatch, server, manifest=manifest)
    with pytest.raises(fetch.ChecksumMismatch, match="missing: toy/not_there.json"):
        fetch.fetch("toy", tmp_path)
    assert not (tmp_path / "toy").exists()


def test_interrupted_download_resumes_with_a_range_request(server, monkeypatch, tmp_path):
    archive = _register(monkeypatch, server)
    server.mode = "cut"
    with pytest.raises(fetch.FetchError, match="run the same command again"):
        fetch.fetch("toy", tmp_path)
    part = tmp_path / ".downloads" / "o+toy@abc123.tar.gz.part"
    have = part.stat().st_size
    assert 0 < have < len(archive) and not (tmp_path / "toy").exists()
    report = fetch.fetch("toy", tmp_path)
    assert server.ranges == [None, f"bytes={have}-"]        # only the rest was asked for
    assert report.verified == 2 and not part.exists()
    assert (tmp_path / ".downloads" / "o+toy@abc123.tar.gz").read_bytes() == archive


def test_a_server_ignoring_range_restarts_the_download_cleanly(server, monkeypatch, tmp_path):
    archive = _register(monkeypatch, server)
    part = tmp_path / ".downloads" / "o+toy@abc123.tar.gz.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"garbage from an older attempt")
    server.mode = "norange"
    fetch.fetch("toy", tmp_path)
    assert server.ranges == [f"bytes={len(b'garbage from an older attempt')}-"]
    assert (tmp_path / ".downloads" / "o+toy@abc123.tar.gz").read_bytes() == archive


def test_unsafe_archive_paths_are_refused(server, monkeypatch, tmp_path):
    _register(monkeypatch, server, files={"data/../../evil.txt": b"x", **FILES})
    with pytest.raises(fetch.FetchError, match="unsafe path"):
        fetch.fetch("toy", tmp_path)
    assert not (tmp_path.parent / "evil.txt").exists() and not (tmp_path / "toy").exists()


def test_nested_archives_and_sources_without_hashes(server, monkeypatch, tmp_path):
    inner = _tar({"flat30-1.cnf": b"p cnf 1 1\n1 0\n"}, top="flat30-60")
    files = {"data/questions.json": FILES["data/questions.json"], "instances/flat.tar.gz": inner}
    _register(monkeypatch, server, files=files, nested={
        "archive": "instances/flat.tar.gz", "dest": "toy/flat/", "suffix": ".cnf"},
        manifest={"toy/questions.json": [_sha(files["data/questions.json"]), 10],
                  "toy/flat/flat30-1.cnf": [_sha(b"p cnf 1 1\n1 0\n"), 14]})
    assert fetch.fetch("toy", tmp_path).verified == 2
    entries = registry.load()
    entries["toy"]["sources"][0]["files"] = {}
    with pytest.raises(fetch.FetchError, match="--allow_unverified"):
        fetch.fetch("toy", tmp_path / "other")
    report = fetch.fetch("toy", tmp_path / "other", allow_unverified=True)
    assert report.verified == 0 and len(report.unverified) == 2


def test_the_real_registry_matches_the_shared_data(benchdata):
    """Every recorded sha256 describes a file of the shared copy (they were taken from it)."""
    for key in ("spider", "satlib", "smtlib", "proofnet"):
        ok, bad, missing = fetch.verify(key, benchdata)
        assert ok and not bad and not missing, key
    for entry in registry.load().values():
        for source in entry["sources"]:
            assert source["archive_sha256"] or source["archive_sha256_note"]
            assert source["url"].startswith("https://")


def _cli(*args, data):
    env = dict(os.environ, COUNTERMEM_DATA=str(data), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "countermem_jax.data", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_list_and_fetch_on_an_empty_data_folder(tmp_path):
    out = _cli("list", data=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "spider             spider      missing" in out.stdout
    assert out.stdout.count("missing") >= 12
    out = _cli("fetch", "amber", data=tmp_path)
    assert out.returncode == 1 and "no downloadable release is recorded" in out.stdout
    out = _cli("fetch", "nosuch", data=tmp_path)
    assert out.returncode == 1 and "unknown benchmark 'nosuch'" in out.stdout
    assert not list(tmp_path.iterdir())     # nothing downloaded


def test_cli_list_reports_the_shared_data(benchdata):
    out = _cli("list", data=benchdata)
    assert "satlib             satlib      present    610/610" in out.stdout, out.stdout


def test_quickstart_without_data_it_cannot_fetch_names_the_command_that_gets_spider(tmp_path):
    """The set-up finds this environment installed; the fetch goes through a proxy on a closed
    loopback port, as where GitHub is unreachable (the test never leaves 127.0.0.0/8)."""
    proxy = "http://127.0.0.1:9"
    env = dict(os.environ, COUNTERMEM_DATA=str(tmp_path), VIRTUAL_ENV=sys.prefix,
               PATH=f"{sys.prefix}/bin:{os.environ['PATH']}", https_proxy=proxy,
               HTTPS_PROXY=proxy, http_proxy=proxy, HTTP_PROXY=proxy, no_proxy="", NO_PROXY="")
    out = subprocess.run(["bash", str(ROOT / "launch" / "quickstart_cpu.sh"), str(tmp_path / "w")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1, out.stderr[-2000:]
    assert "Spider could not be fetched" in out.stdout, out.stdout[-2000:]
    assert f"python -m countermem_jax.data fetch spider --root {tmp_path}" in out.stdout
    assert not (tmp_path / "w").exists()


def test_the_test_command_without_an_environment_says_how_to_set_up(tmp_path):
    (tmp_path / "launch").mkdir()
    shutil.copy(ROOT / "launch" / "test.sh", tmp_path / "launch" / "test.sh")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    out = subprocess.run(["bash", str(tmp_path / "launch" / "test.sh")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout.strip() == ("error: no .venv here and no virtual environment active; set up "
                                  "with: bash launch/setup.sh")


def test_cli_fetch_prints_what_was_verified_and_what_to_set(server, monkeypatch, tmp_path, capsys):
    from absl import flags
    from countermem_jax.data import __main__ as cli
    _register(monkeypatch, server)
    monkeypatch.setenv("COUNTERMEM_DATA", str(tmp_path))
    flags.FLAGS(["data"])
    assert cli.main(["data", "fetch", "toy"]) == 0
    out = capsys.readouterr().out
    assert "verified 2 files by their recorded sha256" in out
    assert "1 further files have no recorded sha256" in out
    assert out.strip().endswith(f"export COUNTERMEM_DATA={tmp_path}")
    assert cli.main(["data", "verify", "toy"]) == 0
    (tmp_path / "toy/db/a.sqlite").write_bytes(b"changed")
    assert cli.main(["data", "verify", "toy"]) == 1
    assert "sha256 mismatch: toy/db/a.sqlite" in capsys.readouterr().out


def test_cli_prints_swebench_checkout_commands(benchdata, monkeypatch, capsys):
    from absl import flags
    from countermem_jax.data import __main__ as cli
    monkeypatch.setenv("COUNTERMEM_DATA", str(benchdata))
    flags.FLAGS(["data", "--out=/tmp/co"])
    try:
        assert cli.main(["data", "checkouts", "swebench"]) == 0
    finally:
        flags.FLAGS["out"].value = "checkouts"
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 30 and all(l.startswith("git clone https://github.com/") for l in lines)
    assert " /tmp/co/" in lines[0] and "checkout " in lines[0]


def test_post_steps_write_the_manifests_the_sat_and_smt_loaders_read(server, monkeypatch,
                                                                     tmp_path):
    from evaluators.sat import load_satlib
    from evaluators.smt import load_smtlib
    sat = {"uf20-91/uf20-01.cnf": b"p cnf 2 1\n1 2 0\n", "uuf20-91/uuf20-01.cnf":
           b"p cnf 1 2\n1 0\n-1 0\n"}
    smt = {"QF_LIA/QF_LIA__fam__a.smt2": b"(set-info :status sat)\n(declare-const x Int)\n"
           b"(assert (> x 1))\n(check-sat)\n"}
    for kind, files, top in (("satlib_manifest", sat, "satlib/"), ("smtlib_manifest", smt,
                                                                     "smtlib/")):
        archive = _tar({f"data/{k}": v for k, v in files.items()})
        server.files["/toy.tar.gz"] = archive
        entries = {"toy": {"title": "toy", "marker": top, "post": kind, "sources": [{
            "repo": "o/toy", "commit": kind, "url": server.url + "/toy.tar.gz",
            "archive_sha256": _sha(archive), "include": [["data/", top]],
            "files": {top + k: [_sha(v), len(v)] for k, v in files.items()}}]}}
        monkeypatch.setattr(registry, "load", lambda entries=entries: entries)
        assert fetch.fetch("toy", tmp_path).verified == len(files)
    assert {t.reference.status for t in load_satlib(tmp_path / "satlib")} == {"SAT", "UNSAT"}
    [task] = load_smtlib(tmp_path / "smtlib")
    assert task.reference.status == "sat" and task.features == {"logic": "QF_LIA", "family": "fam"}


def test_a_recorded_archive_sha256_is_enforced(server, monkeypatch, tmp_path):
    _register(monkeypatch, server)
    registry.load()["toy"]["sources"][0]["archive_sha256"] = "f" * 64
    with pytest.raises(fetch.ChecksumMismatch, match="recorded archive sha256"):
        fetch.fetch("toy", tmp_path)
    assert not (tmp_path / "toy").exists() and not list((tmp_path / ".downloads").iterdir())
