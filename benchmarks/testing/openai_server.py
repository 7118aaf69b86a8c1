"""A small OpenAI-format HTTP server on 127.0.0.1 for tests and the client benchmark."""
import argparse
import collections
import contextlib
import email.utils
import http.server
import importlib
import json
import os
import select
import socket
import socketserver
import subprocess
import sys
import threading
import time


# What llama_cpp.server (0.3.x) answers to ``response_format: {"type": "json_schema"}``.
LLAMA_CPP_REFUSAL = json.dumps({"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
               "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
               "'input': 'json_schema'}", "type": "internal_server_error", "param": None,
    "code": None}}).encode()


def _gone(handlers) -> list:
    """The handlers whose client closed the connection before its reply (one ``select`` over
    them all: a waiting client sends nothing, so only a closed connection reads as ready)."""
    handlers = list(handlers)
    try:
        ready, _, _ = select.select([h.connection for h in handlers], [], [], 0)
    except (OSError, ValueError):
        return []
    gone = []
    for h in handlers:
        if h.connection in ready:
            try:
                if h.connection.recv(1, socket.MSG_PEEK) == b"":
                    gone.append(h)
            except OSError:
                gone.append(h)
    return gone


class _Handler(http.server.BaseHTTPRequestHandler):
    """One request: the behaviour comes from the owning ``LocalOpenAIServer``."""
    # Keep-alive, as OpenAI-compatible servers speak it: the client's connection pool is
    # exercised as in production.
    protocol_version = "HTTP/1.1"

    def setup(self):
        """Socket options for the accepted connection."""
        super().setup()
        # Headers and body go out in separate writes; without TCP_NODELAY, Nagle's algorithm and
        # delayed ACKs add ~40 ms to every keep-alive request.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args):  # keep test output clean
        pass

    def do_GET(self):
        """``/health`` (any path): always ok, so readiness checks never see injected failures;
        ``/v1/models`` lists the served name with ``max_model_len``, as vLLM does."""
        body = b'{"status":"ok"}'
        if self.path.startswith("/stats"):
            body = json.dumps(self.server.owner.stats(reset="reset=1" in self.path)).encode()
        elif self.path.rstrip("/").endswith("/v1/models"):
            owner = self.server.owner
            card = {"id": owner.model_id, "object": "model", "owned_by": "vllm"}
            if owner.max_model_len:
                card["max_model_len"] = owner.max_model_len
            body = json.dumps({"object": "list", "data": [card]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        """A chat completion, or the failure the script or the default asks for."""
        server: "LocalOpenAIServer" = self.server.owner
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        behavior = server.next_behavior()
        # Counted before any latency or failure, so the peak is the number of requests clients
        # had open at once, whatever they were answered with. A request whose client has gone
        # (a killed process: vLLM aborts those) leaves the count before it would raise the peak.
        with server.lock:
            if server.in_flight + 1 > server.peak_in_flight:
                server.open_requests.difference_update(_gone(server.open_requests))
            server.open_requests.add(self)
            server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
            server.requests.append(request)
            server.arrivals.append(time.monotonic())
        try:
            if server.latency_s:
                time.sleep(server.latency_s)
            if behavior.startswith("slow:"):
                time.sleep(float(behavior.split(":", 1)[1]))
                behavior = "ok"
            if behavior == "drop":
                # No response at all: the client sees the connection end mid-request.
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if behavior.startswith("context_length") or server.over_context(request):
                self._send(400, server.context_error(request, behavior == "context_length_llama"))
                return
            if behavior.startswith("retry_after"):
                kind, _, seconds = behavior.partition(":")
                value = (email.utils.formatdate(time.time() + float(seconds), usegmt=True)
                         if kind == "retry_after_date" else seconds)
                status = 503 if kind == "retry_after_date" else 429
                self._send(status, b'{"error": "slow down"}', {"Retry-After": value})
                return
            if server.refuses(request):
                if server.refuse_like_llama_cpp:
                    self._send(500, LLAMA_CPP_REFUSAL)
                else:
                    self._send(400, b'{"error": {"message": "response_format is not supported"}}')
                return
            if behavior in ("500", "429", "400", "503"):
                self._send(int(behavior), b'{"error": "injected failure"}')
                return
            if behavior == "malformed":
                self._send(200, b'{"choices": [ this is not json')
                return
            self._send(200, server.encode(server.reply(request)))
        finally:
            self._done()

    def _done(self):
        """The request leaves the in-flight count, once: before its body is written, since a
        client that has read the body may send its next request before this thread runs again
        (a loaded machine would otherwise see one request too many in flight)."""
        with self.server.owner.lock:
            self.server.owner.open_requests.discard(self)

    def _send(self, status, body: bytes, headers: dict | None = None):
        """A JSON response with its Content-Length (required on a keep-alive connection)."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._done()
        self.wfile.write(body)


class _ThreadingServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    """A thread per connection, so concurrent client requests are served concurrently."""
    daemon_threads = True
    # A deep accept backlog: a client opening hundreds of connections at once must not be
    # refused by the listening socket before the server gets to them.
    request_queue_size = 512


class LocalOpenAIServer:
    """``with LocalOpenAIServer() as srv: srv.base_url`` -> "http://127.0.0.1:PORT/v1".

    ``latency_s`` delays every reply; ``default`` is the behaviour when ``script`` (a queue a
    test appends behaviours to) is empty; ``with_usage=False`` omits the usage block, so the
    client must count tokens itself; ``reasoning_field`` names the field the reasoning text is
    sent in ("reasoning_content" or "reasoning", as servers differ); ``name`` appears in the
    echo, to tell several servers (replicas) apart. The port is chosen by the OS.
    ``gpt_oss_style`` answers as vLLM serves gpt-oss: a reply spends ``reasoning_tokens``
    thinking first (cut off with empty content and ``finish_reason: length`` when ``max_tokens``
    is smaller), then content meeting the request's JSON schema unless ``ignore_constraints``;
    ``cached_tokens`` are reported as ``prompt_tokens_details.cached_tokens``;
    ``refuse_constraints`` answers any constrained request with HTTP 400,
    ``refuse_constraint_names`` only those whose JSON schema has one of these names
    (``refuse_like_llama_cpp``: with llama.cpp's HTTP 500 validation error instead).
    ``max_model_len`` (shown in ``/v1/models``) refuses, as vLLM does, a request whose prompt
    (counted with the gpt-oss tokenizer) and ``max_tokens`` exceed it; ``usage`` replaces the
    usage block of every reply; ``reasoning_details=False`` leaves ``completion_tokens_details``
    out; ``model_id`` is the name ``/v1/models`` lists.
    """

    def __init__(self, latency_s: float = 0.0, default: str = "ok", with_usage: bool = True,
                 reasoning_field: str = "reasoning_content", name: str = "local",
                 responder=None, gpt_oss_style: bool = False, reasoning_tokens: int = 0,
                 cached_tokens: int = 0, ignore_constraints: bool = False,
                 refuse_constraints: bool = False, refuse_constraint_names=(),
                 max_model_len: int | None = None, usage: dict | None = None,
                 reasoning_details: bool = True, model_id: str = "openai/gpt-oss-120b",
                 refuse_like_llama_cpp: bool = False):
        self.latency_s = latency_s
        self.responder = responder
        self.default = default
        self.with_usage = with_usage
        self.reasoning_field = reasoning_field
        self.name = name
        self.gpt_oss_style = gpt_oss_style
        self.reasoning_tokens = reasoning_tokens
        self.cached_tokens = cached_tokens
        self.ignore_constraints = ignore_constraints
        self.refuse_constraints = refuse_constraints
        self.refuse_constraint_names = set(refuse_constraint_names)
        self.refuse_like_llama_cpp = refuse_like_llama_cpp
        self.max_model_len = max_model_len
        self.usage = usage
        self.reasoning_details = reasoning_details
        self.model_id = model_id
        self.arrivals: list[float] = []
        self.script: collections.deque[str] = collections.deque()
        self.lock = threading.Lock()
        self.peak_in_flight = 0
        self.open_requests: set = set()   # the handlers whose request awaits its reply
        self.requests: list[dict] = []
        self._httpd = _ThreadingServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def in_flight(self) -> int:
        """Requests received and not yet answered."""
        return len(self.open_requests)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL clients are given."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def next_behavior(self) -> str:
        """The next scripted behaviour ("ok", "slow:<s>", "500", "drop", "malformed", ...), else
        the default."""
        with self.lock:
            return self.script.popleft() if self.script else self.default

    def refuses(self, request: dict) -> bool:
        """Whether the request's output constraint is refused (all, or by its name)."""
        constrained = "response_format" in request or "structured_outputs" in request
        name = ((request.get("response_format") or {}).get("json_schema") or {}).get("name")
        return constrained and (self.refuse_constraints or name in self.refuse_constraint_names)

    @staticmethod
    def prompt_tokens(request: dict) -> int:
        """The request's prompt in gpt-oss tokens (as the client's tokenizer counts them)."""
        from countermem_jax.backbones import tokens
        return tokens.count_messages(request.get("messages") or [])

    def over_context(self, request: dict) -> bool:
        """Whether prompt plus ``max_tokens`` exceed ``max_model_len`` (vLLM refuses it)."""
        return bool(self.max_model_len) and (self.prompt_tokens(request) + int(
            request.get("max_tokens") or 0) > self.max_model_len)

    def context_error(self, request: dict, llama_cpp: bool = False) -> bytes:
        """The HTTP 400 body of a prompt past the context, as vLLM or llama.cpp's server send
        it (``vllm/renderers/params.py``; llama.cpp's ``exceed_context_size_error``)."""
        n, limit = self.prompt_tokens(request), self.max_model_len or 32768
        wanted = int(request.get("max_tokens") or 0)
        if llama_cpp:
            return json.dumps({"error": {
                "code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": n,
                "n_ctx": limit, "message": f"request ({n + wanted} tokens) exceeds the "
                                           f"available context size ({limit} tokens), try "
                                           "increasing it"}}).encode()
        return json.dumps({"error": {
            "message": f"You passed {n} input tokens and requested {wanted} output tokens. "
                       f"However, the model's context length is only {limit} tokens, "
                       f"resulting in a maximum input length of {limit - wanted} tokens. "
                       "Please reduce the length of the input prompt.",
            "type": "BadRequestError", "param": "input_tokens", "code": 400}}).encode()

    def stats(self, reset: bool = False) -> dict:
        """Requests served, the peak number in flight and those in flight now."""
        with self.lock:
            out = {"requests": len(self.requests), "peak_in_flight": self.peak_in_flight,
                   "in_flight": self.in_flight}
            if reset:
                self.requests.clear()
                self.peak_in_flight = self.in_flight
        return out

    def reply(self, request: dict) -> dict:
        """The chat-completion body for a request: an echo of the last message, with usage."""
        last = request.get("messages", [{}])[-1].get("content", "")
        text = (self.responder(request) if self.responder is not None
                else f"echo from {self.name}: {last[:50]}")
        finish, reasoning = "stop", "thinking..."
        if self.gpt_oss_style:
            schema = ((request.get("response_format") or {}).get("json_schema") or {}).get(
                "schema")
            if schema is not None and not self.ignore_constraints and self.responder is None:
                text = json.dumps(schema_instance(schema))
            reasoning = "We need to answer in the requested format. " * 4
            if int(request.get("max_tokens") or 0) < self.reasoning_tokens:
                text, finish = "", "length"   # the budget went on thinking
        message = {"role": "assistant", "content": text, self.reasoning_field: reasoning}
        out = {"id": "x", "object": "chat.completion", "model": request.get("model", "m"),
               "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
        if self.with_usage:
            out["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                            "completion_tokens_details": {"reasoning_tokens": 3}}
            if not self.reasoning_details:
                del out["usage"]["completion_tokens_details"]
            if self.cached_tokens:
                out["usage"]["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
            if self.usage is not None:
                out["usage"] = self.usage
        return out

    def encode(self, payload: dict) -> bytes:
        """The response body of a reply (a hostile server overrides it to send broken bytes,
        ``benchmarks/security/hostile_replies.py``)."""
        return json.dumps(payload).encode()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()


def schema_instance(schema: dict):
    """The smallest instance of a JSON schema of the kinds the templates use (objects, arrays,
    strings, integers, enums): what a server enforcing the schema could return."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: schema_instance(v) for k, v in schema.get("properties", {}).items()
                if k in schema.get("required", schema.get("properties", {}))}
    if kind == "array":
        return [schema_instance(schema.get("items", {}))
                for _ in range(max(1, int(schema.get("minItems", 1))))]
    if kind == "integer":
        return int(schema.get("minimum", 1))
    return "x" * max(1, int(schema.get("minLength", 1)))


def load_responder(spec: str, config_file: str = ""):
    """``module:factory`` -> ``factory(config)``, the config read from a JSON file (or {})."""
    module, _, factory = spec.partition(":")
    config = json.loads(open(config_file, encoding="utf-8").read()) if config_file else {}
    return getattr(importlib.import_module(module), factory)(config)


@contextlib.contextmanager
def server_process(latency_s: float = 0.0, responder: str = "", responder_config: str = ""):
    """The same server in its own process (so a benchmark's client does not share its GIL);
    yields the base URL. ``responder`` / ``responder_config``: see ``load_responder``."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.testing.openai_server",
                             "--latency_s", str(latency_s), "--responder", responder,
                             "--responder_config", responder_config], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": path})
    try:
        url = proc.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"local server did not start: {url!r}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _main():
    """Serves until killed, after printing the base URL as the first line (``server_process``
    waits for it)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency_s", type=float, default=0.0)
    parser.add_argument("--responder", default="", help="module:factory scripting the replies")
    parser.add_argument("--responder_config", default="", help="JSON file given to the factory")
    parser.add_argument("--gpt_oss_style", action="store_true", help="replies meet the schema")
    parser.add_argument("--refuse_constraint_names", default="",
                        help="comma-separated constraint names answered with HTTP 400")
    parser.add_argument("--model_id", default="openai/gpt-oss-120b", help="/v1/models lists it")
    args = parser.parse_args()
    responder = load_responder(args.responder, args.responder_config) if args.responder else None
    refused = [n for n in args.refuse_constraint_names.split(",") if n]
    with LocalOpenAIServer(latency_s=args.latency_s, responder=responder,
                           gpt_oss_style=args.gpt_oss_style, refuse_constraint_names=refused,
                           model_id=args.model_id) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    _main()
