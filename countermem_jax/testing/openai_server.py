"""A small OpenAI-format HTTP server on 127.0.0.1 for tests and the client benchmark.

It stands in for the served gpt-oss-120b / API backbones of paper §4.1 (``backbones/openai_http``
is the real client and talks to it over a real loopback socket).

It answers ``POST /v1/chat/completions`` and ``GET /health``, and can be told, per request or by
default, to be slow, fail with 500 / 429 / 400, return malformed JSON, or drop the connection.
It counts requests and the peak number served at once.

The injected failures are the ones the client must survive on a real deployment (429 and 5xx
are retried, 400 is not, malformed JSON and dropped connections are retried), and the peak
count lets a test check that the client's concurrency limit holds. The replies are canned
echoes, never model output: this server tests transport, not the method.
"""
import argparse
import collections
import contextlib
import http.server
import json
import socket
import socketserver
import subprocess
import sys
import threading
import time


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
        """``/health`` (any path): always ok, so readiness checks never see injected failures."""
        body = b'{"status":"ok"}'
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
        # Counted before any latency or failure, so the peak is the number of requests the
        # client had open at once, whatever they were answered with.
        with server.lock:
            server.in_flight += 1
            server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
            server.requests.append(request)
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
            if behavior in ("500", "429", "400", "503"):
                self._send(int(behavior), b'{"error": "injected failure"}')
                return
            if behavior == "malformed":
                self._send(200, b'{"choices": [ this is not json')
                return
            self._send(200, json.dumps(server.reply(request)).encode())
        finally:
            with server.lock:
                server.in_flight -= 1

    def _send(self, status, body: bytes):
        """A JSON response with its Content-Length (required on a keep-alive connection)."""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
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
    """

    def __init__(self, latency_s: float = 0.0, default: str = "ok", with_usage: bool = True,
                 reasoning_field: str = "reasoning_content", name: str = "local"):
        self.latency_s = latency_s
        self.default = default
        self.with_usage = with_usage
        self.reasoning_field = reasoning_field
        self.name = name
        self.script: collections.deque[str] = collections.deque()
        self.lock = threading.Lock()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.requests: list[dict] = []
        self._httpd = _ThreadingServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """The OpenAI-style base URL clients are given."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def next_behavior(self) -> str:
        """The next scripted behaviour ("ok", "slow:<s>", "500", "drop", "malformed", ...), else
        the default."""
        with self.lock:
            return self.script.popleft() if self.script else self.default

    def reply(self, request: dict) -> dict:
        """The chat-completion body for a request: an echo of the last message, with usage."""
        last = request.get("messages", [{}])[-1].get("content", "")
        text = f"echo from {self.name}: {last[:50]}"
        message = {"role": "assistant", "content": text, self.reasoning_field: "thinking..."}
        out = {"id": "x", "object": "chat.completion", "model": request.get("model", "m"),
               "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        if self.with_usage:
            out["usage"] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
                            "completion_tokens_details": {"reasoning_tokens": 3}}
        return out

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._httpd.shutdown()
        self._httpd.server_close()


@contextlib.contextmanager
def server_process(latency_s: float = 0.0):
    """The same server in its own process (so a benchmark's client does not share its GIL);
    yields the base URL."""
    proc = subprocess.Popen([sys.executable, "-m", "countermem_jax.testing.openai_server",
                             "--latency_s", str(latency_s)], stdout=subprocess.PIPE, text=True)
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
    args = parser.parse_args()
    with LocalOpenAIServer(latency_s=args.latency_s) as server:
        print(server.base_url, flush=True)
        threading.Event().wait()


if __name__ == "__main__":
    _main()
