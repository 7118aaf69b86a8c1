"""A loopback stand-in for the Hugging Face Hub's HTTP API, for tests that run the real `hf` CLI
and `huggingface_hub.snapshot_download` with HF_ENDPOINT pointing here.

It serves one repository with the file list of openai/gpt-oss-120b
(tests/fake_bin/recorded/gpt_oss_120b_files.json) through the endpoints huggingface_hub 1.x
calls for a snapshot download:

  GET  /api/models/{repo}/revision/{rev}     repo_info: the commit sha and the siblings
  GET  /api/models/{repo}/tree/{sha}?recursive=true   list_repo_tree (one page, no Link header)
  HEAD /{repo}/resolve/{sha}/{path}          file metadata: X-Repo-Commit, ETag, Content-Length
  GET  /{repo}/resolve/{sha}/{path}          the file's bytes (a few bytes naming the file)

Errors are answered as the Hub answers them: a repository that does not exist gets 401 with
X-Error-Code RepoNotFound when no token is sent and 404 with it when one is; an unknown revision
404 with RevisionNotFound; a token listed in `bad_tokens` 401 "Invalid credentials in
Authorization header"; `gated=True` 403 with GatedRepo. Every request is logged in `requests`
as (method, path)."""
import hashlib
import http.server
import json
import pathlib
import threading
import urllib.parse

RECORDING = pathlib.Path(__file__).parent / "fake_bin" / "recorded" / "gpt_oss_120b_files.json"
SHA = "b5c939de8f754692c1647ca79fbf85e8c1e70f8a"


def gpt_oss_files() -> dict:
    """The repository's files and their sizes on the Hub (None where no page gave one)."""
    return json.loads(RECORDING.read_text())["files"]


def _content(path: str) -> bytes:
    return f"stand-in bytes of {path}\n".encode()


class HubStandIn:
    def __init__(self, repo="openai/gpt-oss-120b", files=None, gated=False, bad_tokens=()):
        self.repo, self.gated, self.bad_tokens = repo, gated, set(bad_tokens)
        self.files = sorted(files or gpt_oss_files())
        self.requests: list[tuple[str, str]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                owner._answer(self, head=True)

            def do_GET(self):
                owner._answer(self, head=False)

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()

    def fetched(self) -> list[str]:
        """The files whose bytes were downloaded (GET on /resolve/)."""
        marker = f"/{self.repo}/resolve/{SHA}/"
        return sorted(urllib.parse.unquote(p.split(marker, 1)[1])
                      for m, p in self.requests if m == "GET" and marker in p)

    # --- the Hub's answers
    def _send(self, h, status, body=b"", headers=None, head=False):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)

    def _error(self, h, status, code, message, head):
        self._send(h, status, json.dumps({"error": message}).encode(),
                   {"Content-Type": "application/json", "X-Error-Code": code,
                    "X-Error-Message": message}, head)

    def _answer(self, h, head):
        self.requests.append(("HEAD" if head else "GET", h.path))
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        auth = h.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        if token in self.bad_tokens:
            return self._send(h, 401, b'{"error": "Invalid credentials in Authorization header"}',
                              {"Content-Type": "application/json",
                               "X-Error-Message": "Invalid credentials in Authorization header"},
                              head)
        for prefix in (f"/api/models/{self.repo}/", f"/{self.repo}/"):
            if path.startswith(prefix):
                break
        else:
            if token:
                return self._error(h, 404, "RepoNotFound", "Repository not found", head)
            return self._error(h, 401, "RepoNotFound", "Invalid username or password.", head)
        if self.gated:
            return self._error(h, 403, "GatedRepo",
                               "Access to model is restricted. You must have access to it and be "
                               "authenticated to access it. Please log in.", head)
        rest = path[len(prefix):]
        if prefix.startswith("/api/"):
            kind, _, rev = rest.partition("/")
            rev = rev.split("/", 1)[0]
            if rev not in ("main", SHA):
                return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            if kind == "revision":
                body = {"id": self.repo, "modelId": self.repo, "sha": SHA, "private": False,
                        "gated": False, "siblings": [{"rfilename": f} for f in self.files]}
            elif kind == "tree":
                body = [{"type": "file", "path": f, "size": len(_content(f)),
                         "oid": hashlib.sha1(_content(f)).hexdigest()} for f in self.files]
            else:
                return self._error(h, 404, "EntryNotFound", "not served here", head)
            return self._send(h, 200, json.dumps(body).encode(),
                              {"Content-Type": "application/json"}, head)
        kind, _, rest = rest.partition("/")
        rev, _, file = rest.partition("/")
        if kind != "resolve":
            return self._error(h, 404, "EntryNotFound", "not served here", head)
        if rev not in ("main", SHA):
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        if file not in self.files:
            return self._error(h, 404, "EntryNotFound", f"{file} does not exist", head)
        body = _content(file)
        return self._send(h, 200, body, {"X-Repo-Commit": SHA,
                                         "ETag": f'"{hashlib.sha1(body).hexdigest()}"',
                                         "Content-Type": "application/octet-stream"}, head)
