"""The hostile-server family of the security catalogue (``benchmarks/security/hostile.py``, issue 39): a
served model can return anything, and no reply may end or stall a build.

    python -m benchmarks.security.hostile --only=reply_

Each case runs ``build_memory`` on the CPU Spider config (``configs/spider_react_cpu.py``,
``N_BUILD`` construction tasks) with ``backbone.kind=openai`` against ``HostileServer``, a
loopback OpenAI-compatible server (``testing/openai_server.py``) that answers as the scripted
SQL model does (``benchmarks/scripted_sql.py``) except that the replies to one prompt template (the
draft, the local edits, the distillation, or every one) come back broken in one way: a lone
surrogate, bytes that are not UTF-8, a query nested 60 parentheses deep, 1 MB, thousands of
``FIND:`` lines, NUL, empty ``choices``, ``finish_reason`` "length" on valid JSON, a 40k-space
run, JSON nested 100,000 deep (in the reply, or the whole body), a body that is not JSON,
content that is not text, a choice without a message, a 9 MB body. A case passes when the
build finishes within ``CASE_SECONDS``, the broken replies were asked for and counted
(``malformed_replies`` in the ledger and the reply outcomes of the run log's ``phase_end``; a
cut reply among the truncations), the frozen store loads and the run log and store are valid
UTF-8. One line per case as ``hostile.py`` prints them.
"""
import contextlib
import io
import json
import pathlib
import shutil
import tempfile
import threading
import time

from benchmarks import scripted_sql
from benchmarks.testing.openai_server import LocalOpenAIServer

N_BUILD = 3          # construction tasks per case: the first drafts, their edits and records
CASE_SECONDS = 120   # a build against a hostile server must finish within this
_BAD_BYTES_MARK = "@@not-utf8@@"   # replaced by bytes that are not UTF-8 in the body

# Which prompt template a request is, from its last message (as ``scripted_sql`` tells them).
TARGETS = ("draft", "edits", "distil", "every")


def template_of(text: str) -> str:
    """"edits", "distil", "judge", "revise" or "draft" for a request's last message."""
    if text.startswith("You decide whether a stored correction applies"):
        return "judge"
    if "Propose up to" in text and "Failed action:" in text:
        return "edits"
    if "Original action (failed):" in text:
        return "distil"
    if "A stored correction from an earlier task" in text:
        return "revise"
    return "draft"


def _append(suffix: str):
    """A change of the reply's text: ``suffix`` added inside it (inside the SQL code block, so
    the draft carries it; after a JSON value's last string, so structured replies do too)."""
    def change(text: str) -> str:
        if text.endswith("\n```"):
            return text[:-4] + suffix + "\n```"
        if text.endswith('"}]}') or text.endswith('"}'):   # into the JSON text as it is:
            end = text.rfind('"')                            # the client's parse meets it
            return text[:end] + suffix + text[end:]
        return text + suffix
    return change


def _nested(text: str) -> str:
    """The reply with a 60-deep parenthesised expression where its query or text is."""
    if text.startswith("```sql"):
        # a draft: its query filtered by a 60-deep true condition (SQLite accepts it, sqlglot
        # cannot parse it), with the mistake the scripted edit removes, so a verified edit of
        # a 60-deep query reaches the distillation and its derived condition
        query = text[len("```sql\n"):-len("\n```")].replace(scripted_sql.MISTAKE, "")
        return (f"```sql\nSELECT * FROM ({query}) WHERE " + "(" * 60 + "1" + ")" * 60
                + scripted_sql.MISTAKE + "\n```")
    if '"find"' in text:            # structured edits: LIMIT 0 becomes a 60-deep LIMIT
        return json.dumps({"edits": [{"find": "LIMIT 0",
                                      "replace": "LIMIT " + "(" * 60 + "1" + ")" * 60}]})
    if text.startswith("EDIT"):
        return "EDIT 1\nFIND: LIMIT 0\nREPLACE: LIMIT " + "(" * 60 + "1" + ")" * 60 + "\n"
    return _append(" " + "(" * 60 + "x" + ")" * 60)(text)


def _many_find(text: str) -> str:
    """1 MB of ``FIND:`` lines without a REPLACE, then the reply."""
    return "FIND: x\n" * 131072 + text


# Reply kinds: name -> (the targets it is tried on, how the content changes, what the body
# or choice becomes). A ``content`` change keeps a well-formed response around broken text;
# a ``body`` kind replaces the response itself.
KINDS = {
    "lone_surrogate": (TARGETS, _append("\udcff"), None),
    "invalid_bytes": (TARGETS, _append(_BAD_BYTES_MARK), None),
    "nul": (("draft", "distil", "every"), _append("\x00"), None),
    "nested_60": (("draft", "edits", "distil"), _nested, None),
    "one_mb": (TARGETS, _append(" -- " + "x y " * 262144), None),
    "many_find": (("edits", "every"), _many_find, None),
    "whitespace_40k": (("draft", "distil"), _append(" " * 40000 + "and x"), None),
    "deep_json": (("edits", "distil", "every"), lambda text: "[" * 100_000 + text, None),
    "deep_json_body": (("draft",), None, "deep_json_body"),
    "empty_choices": (("draft", "edits", "every"), None, "empty_choices"),
    "length_valid_json": (TARGETS, None, "length"),
    "not_json": (("draft", "every"), None, "not_json"),
    "content_not_text": (("draft", "every"), None, "content_not_text"),
    "no_message": (("edits",), None, "no_message"),
    "body_9mb": (("draft",), None, "body_9mb"),
}
# Kinds whose replies the backbone boundary repairs, so each must be counted as malformed;
# and kinds whose replies are cut, so each must be counted as a truncation.
MALFORMED_KINDS = {"lone_surrogate", "invalid_bytes", "nul", "one_mb", "many_find",
                   "deep_json", "empty_choices", "not_json", "deep_json_body", "content_not_text",
                   "no_message", "body_9mb"}
TRUNCATED_KINDS = {"one_mb", "many_find", "deep_json", "length_valid_json", "body_9mb"}

CASES = {f"reply_{kind}_{target}": (kind, target)
         for kind, (targets, _, _) in KINDS.items() for target in targets}


def _asked(request: dict) -> dict:
    """The request as first asked: a repair round (the template's failed reply and the repair
    message after it) is answered as its template's first request is."""
    messages = list(request["messages"])
    while len(messages) > 2 and messages[-2].get("role") == "assistant":
        messages = messages[:-2]
    return {**request, "messages": messages}


class HostileServer(LocalOpenAIServer):
    """The scripted SQL model over loopback HTTP, its replies to ``target`` broken as ``kind``
    says; ``served`` counts the broken replies it sent."""

    def __init__(self, responder, kind: str, target: str):
        super().__init__(responder=lambda request: responder(_asked(request)), name="hostile")
        self.kind, self.target = kind, target
        self.served = 0
        # a client that stops reading a body past its bound resets the connection: expected
        self._httpd.handle_error = lambda request, address: None
        self._count_lock = threading.Lock()

    def _hit(self, request: dict) -> bool:
        text = _asked(request)["messages"][-1]["content"]
        return self.target == "every" or template_of(text) == self.target

    def reply(self, request: dict) -> dict:
        out = super().reply(request)
        message = out["choices"][0]["message"]
        if (template_of(_asked(request)["messages"][-1]["content"]) == "draft"
                and scripted_sql.MISTAKE not in message["content"]):
            # every draft fails, so that every case also asks for edits and a distillation
            message["content"] = message["content"].replace(
                "\n```", scripted_sql.MISTAKE + "\n```", 1)
        if not self._hit(request):
            return out
        with self._count_lock:
            self.served += 1
        _, change, body = KINDS[self.kind]
        choice = out["choices"][0]
        if change is not None:
            choice["message"]["content"] = change(choice["message"]["content"])
        elif body == "empty_choices":
            out["choices"] = []
        elif body == "length":
            choice["finish_reason"] = "length"
        elif body == "content_not_text":
            choice["message"]["content"] = {"text": choice["message"]["content"]}
        elif body == "no_message":
            del choice["message"]
        else:   # body kinds sent as raw bytes
            out["_raw"] = body
        return out

    def encode(self, payload: dict) -> bytes:
        raw = payload.pop("_raw", None)
        if raw == "not_json":
            return b'{"choices": [ this is not json'
        if raw == "deep_json_body":   # JSON nested past any parser's stack
            return b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        if raw == "body_9mb":
            payload["choices"][0]["message"]["content"] = "x" * (9 << 20)
        body = json.dumps(payload).encode()
        return body.replace(_BAD_BYTES_MARK.encode(), b"\xff\xfe\xc3(")


def _config(base_url: str, data_dir: str = ""):
    """The CPU Spider config, on the loopback server, with a short construction split."""
    from countermem_jax.protocol import config_files
    cfg = config_files.load("configs/spider_react_cpu.py")
    cfg.backbone.update(kind="openai", base_urls=base_url, model="hostile", cache_dir="",
                        timeout_s=60.0, max_attempts=2)
    cfg.splits.update(n_build=N_BUILD)
    if data_dir:
        cfg.data.data_dir = data_dir
    return cfg


def _responder(cfg):
    """The scripted SQL model, knowing every task of the config's benchmark."""
    from countermem_jax import domains
    tasks, _, _ = domains.load_benchmark(cfg.data)
    return scripted_sql.make_responder(scripted_sql.responder_config(tasks))


def run(kind: str, target: str, workdir: pathlib.Path, data_dir: str = "") -> dict:
    """Builds against the hostile server in ``workdir``; returns what the case checks: the
    exception if the build raised, broken replies served, the counts in the run log, whether
    the store loads and the files are UTF-8, the wall time."""
    from countermem_jax import experiment
    from countermem_jax.method.memory.persistence import StoreFormatError, load_store
    from countermem_jax.phases import Workdir
    out = {"raised": "", "served": 0, "malformed": 0, "truncated": 0, "records": None,
           "store_ok": False, "utf8": False}
    start = time.perf_counter()
    cfg = _config("http://127.0.0.1:9/v1", data_dir)
    with HostileServer(_responder(cfg), kind, target) as server:
        cfg.backbone.base_urls = server.base_url
        try:
            with contextlib.redirect_stdout(io.StringIO()):   # one line per case is printed
                experiment.build_memory(cfg, workdir)
        except BaseException as err:   # the failure being tested for (SystemExit included)
            out["raised"] = f"{type(err).__name__}: {str(err)[:80]}"
        out["served"] = server.served
    out["wall_s"] = time.perf_counter() - start
    wd = Workdir(workdir)
    for event in wd.log.events("phase_end"):
        if event.get("phase") == "construction":
            out["malformed"] = sum((event["ledger"].get("malformed_replies") or {}).values())
            out["counted_in_replies"] = event["replies"]["total"].get("malformed_replies", 0)
            out["truncated"] = event["replies"]["total"].get("truncated", 0)
    try:
        store = load_store(wd.frozen)
        out["records"], out["store_ok"] = len(store), True
    except (StoreFormatError, OSError) as err:
        out["store_error"] = str(err)[:120]
    files = [p for p in (wd.frozen, wd.log.path, wd.parse_failures) if p.exists()]
    try:
        for path in files:
            path.read_bytes().decode("utf-8")
        out["utf8"] = bool(files)
    except UnicodeDecodeError as err:
        out["utf8_error"] = str(err)[:120]
    return out


def check(kind: str, target: str, out: dict) -> list[str]:
    """Every requirement the case's outcome ``out`` breaks."""
    failures = []
    if out["raised"]:
        failures.append(f"the build raised {out['raised']}")
    if not out["served"]:
        failures.append("no broken reply was asked for (the case tested nothing)")
    if not out["store_ok"]:
        failures.append(f"the frozen store does not load ({out.get('store_error', '')})")
    if not out["utf8"]:
        failures.append(f"a file written is not UTF-8 ({out.get('utf8_error', 'none written')})")
    if kind in MALFORMED_KINDS and out["served"] and not (
            out["malformed"] and out.get("counted_in_replies")):
        failures.append("the malformed replies were not counted in the run log")
    if kind in TRUNCATED_KINDS and out["served"] and not out["truncated"]:
        failures.append("the cut replies were not counted as truncations")
    if out["wall_s"] > CASE_SECONDS:
        failures.append(f"past its time bound ({CASE_SECONDS} s)")
    return failures


def run_case(name: str) -> tuple[str, float, bool, list[str]]:
    """One catalogue case in a private workdir: (outcome in words, wall seconds, whether the
    store loads, every requirement broken); ``hostile.py`` prints it as one line."""
    kind, target = CASES[name]
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="countermem-hostile-reply-"))
    try:
        out = run(kind, target, workdir / "wd")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    outcome = (f"raised {out['raised']}" if out["raised"] else
               f"{out['served']} sent, {out['malformed']} malformed, {out['truncated']} cut, "
               f"{out['records']} records")
    return outcome[:42], out["wall_s"], out["store_ok"], check(kind, target, out)
