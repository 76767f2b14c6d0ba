"""The Day 02 capture proxy: redaction rules, framing, compression, failures, CLI."""
import gzip
import http.client
import json
import socket
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples" / "day02"))
import proxy  # noqa: E402
from mock_api import MockAPI, reply  # noqa: E402

MODEL = "claude-haiku-4-5"
HELLO = [{"role": "user", "content": "hi"}]
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": MODEL,
           "content": [{"type": "text", "text": "unzipped fine"}], "stop_reason": "end_turn",
           "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 2}}


@pytest.fixture
def start_proxy(tmp_path):
    """Factory: start_proxy(upstream_url) -> (proxy, captures dir)."""
    running = []

    def start(upstream):
        folder = tmp_path / f"captured-{len(running)}"
        server = proxy.CaptureProxy(0, upstream, folder, quiet=True).start_in_background()
        running.append(server)
        return server, folder

    yield start
    for server in running:
        server.stop()


class HandMadeUpstream(BaseHTTPRequestHandler):
    """An upstream with replies the mock does not make: a gzipped body, and a
    stream that pauses after its first event until the test releases it."""
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/gzip"):
            payload = gzip.compress(json.dumps(MESSAGE).encode())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")      # close-delimited, no length
        self.end_headers()
        self.wfile.write(b"event: ping\ndata: {\"type\": \"ping\"}\n\n")
        self.wfile.flush()
        self.server.released_in_time = self.server.release.wait(10)
        self.wfile.write(b"event: done\ndata: {}\n\n")
        self.close_connection = True


@pytest.fixture
def hand_made_upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), HandMadeUpstream)
    server.daemon_threads = True
    server.release, server.released_in_time = threading.Event(), None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


def test_redaction_touches_only_present_headers():
    headers = {"Authorization": "Bearer a", "X-API-Key": "b", "Anthropic-OAuth-Token": "c", "X-App": "cli"}
    assert proxy.redact_headers(headers) == {"Authorization": "<redacted>", "X-API-Key": "<redacted>",
                                             "Anthropic-OAuth-Token": "<redacted>", "X-App": "cli"}
    assert proxy.redact_headers({"x-api-key": "k"}) == {"x-api-key": "<redacted>"}
    assert proxy.redact_headers({}) == {}
    assert headers["Authorization"] == "Bearer a"    # the forwarded copy keeps the real value


def test_non_json_and_empty_bodies_are_still_captured():
    assert proxy.parse_body(b"") is None
    assert proxy.parse_body(b"not json \xff") == "not json \ufffd"
    assert proxy.parse_body(b'{"a": [1]}') == {"a": [1]}


def test_stream_chunks_are_relayed_before_the_upstream_finishes(start_proxy, hand_made_upstream):
    server, _ = start_proxy(f"http://127.0.0.1:{hand_made_upstream.server_port}")
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("POST", "/v1/messages", body=b"{}", headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    assert response.getheader("Transfer-Encoding") == "chunked"   # our own framing for our client
    assert response.getheader("Connection") is None               # upstream's close is not relayed
    first = response.read1(65536)                                 # would time out if buffered
    assert first.startswith(b"event: ping")
    assert hand_made_upstream.released_in_time is None            # the upstream is still waiting
    hand_made_upstream.release.set()
    rest = response.read()
    conn.close()
    assert rest == b"event: done\ndata: {}\n\n"
    assert hand_made_upstream.released_in_time is True


def test_compressed_bodies_pass_through_with_their_encoding(start_proxy, hand_made_upstream):
    server, folder = start_proxy(f"http://127.0.0.1:{hand_made_upstream.server_port}/gzip")
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    answer = client.messages.create(model=MODEL, max_tokens=16, messages=HELLO)
    assert answer.content[0].text == "unzipped fine"
    assert json.loads((folder / "request-1.json").read_text())["path"] == "/v1/messages"


def test_a_broken_upstream_stream_is_an_error_not_a_clean_end(start_proxy):
    """The mock resets the connection mid-stream; the proxy must not turn
    that into a normal end, or the client would take a cut reply as whole."""
    texts, final = [], None
    with MockAPI([reply("this stream will be cut off early", cut_after=4)]) as mock:
        server, _ = start_proxy(mock.url)
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(Exception) as caught:
            with client.messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
                for event in stream:
                    if event.type == "text":
                        texts.append(event.text)
                final = stream.get_final_message()
    assert texts and final is None                    # the start arrived, the end never did
    assert "incomplete" in str(caught.value) or isinstance(caught.value, (anthropic.APIError, OSError))


def test_parallel_requests_get_distinct_numbers(start_proxy):
    with MockAPI(lambda body, n: reply(f"answer {n}")) as mock:
        server, folder = start_proxy(mock.url)
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
        ask = lambda i: client.messages.create(model=MODEL, max_tokens=16,  # noqa: E731
                                               messages=[{"role": "user", "content": f"question {i}"}])
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(ask, range(6)))
        files = sorted(p.name for p in folder.iterdir())
        assert files == [f"request-{n}.json" for n in range(1, 7)]
        asked = sorted(json.loads((folder / f).read_text())["body"]["messages"][0]["content"] for f in files)
        assert asked == [f"question {i}" for i in range(6)]


def test_get_requests_are_relayed_and_captured(start_proxy):
    with MockAPI() as mock:
        server, folder = start_proxy(mock.url)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("GET", "/")
        response = conn.getresponse()
        assert (response.status, response.read()) == (200, b"ok")
        conn.close()
        record = json.loads((folder / "request-1.json").read_text())
        assert (record["method"], record["path"], record["body"]) == ("GET", "/", None)


def run_cli(*args, timeout=15):
    return subprocess.run([sys.executable, str(ROOT / "examples" / "day02" / "proxy.py"), *args],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_cli_reports_a_busy_port(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run_cli("--port", str(busy.getsockname()[1]), "--captures", str(tmp_path / "c"))
    assert result.returncode == 1
    assert "try another --port" in result.stderr and "Traceback" not in result.stderr


def test_cli_rejects_an_upstream_that_is_not_a_url(tmp_path):
    result = run_cli("--port", "0", "--upstream", "api.anthropic.com", "--captures", str(tmp_path / "c"))
    assert result.returncode == 2
    assert "must be an http(s) URL" in result.stderr and "Traceback" not in result.stderr
