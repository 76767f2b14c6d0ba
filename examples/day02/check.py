# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 02 checks: the capture proxy (capture, redaction, relay, streaming).

The real SDK talks to examples/day02/proxy.py, which relays to the local
mock API; KeSi itself is captured through the proxy as a child process.
Run: uv run examples/day02/check.py
"""
import contextlib
import http.client
import io
import json
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from checklib import ROOT, Checks, kesi_subprocess_env  # noqa: E402  (also puts mock_api on sys.path)
import anthropic                                        # noqa: E402
import proxy                                            # noqa: E402
from mock_api import MockAPI, error                     # noqa: E402

SECRET = "sk-ant-check-SECRET-0042"
MODEL = "claude-haiku-4-5"
HELLO = [{"role": "user", "content": "Say one sentence."}]
checks = Checks("Day 02: capture proxy")


@contextlib.contextmanager
def proxied(mock_or_url, quiet=True):
    """A proxy in this process relaying to the mock; yields (proxy, captures dir)."""
    upstream = mock_or_url if isinstance(mock_or_url, str) else mock_or_url.url
    with tempfile.TemporaryDirectory(prefix="kesi-captures-") as folder:
        server = proxy.CaptureProxy(0, upstream, Path(folder), quiet=quiet).start_in_background()
        try:
            yield server, Path(folder)
        finally:
            server.stop()


def sdk_client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=SECRET, max_retries=0)


def load_capture(folder: Path, n: int = 1) -> tuple[dict, str]:
    text = (folder / f"request-{n}.json").read_text(encoding="utf-8")
    return json.loads(text), text


def secret_headers(headers: dict) -> dict:
    return {k: v for k, v in headers.items() if k.lower() in proxy.SECRET_HEADERS}


class HoldingWriter:
    """Wraps the mock's socket writer: the stream pauses before its first
    content_block_stop until the client says it has already seen text."""

    def __init__(self, inner, mock):
        self.inner, self.mock = inner, mock

    def write(self, data):
        if b"event: content_block_stop" in data and self.mock.released_by_client is None:
            self.mock.released_by_client = self.mock.release.wait(10)
        return self.inner.write(data)

    def __getattr__(self, name):
        return getattr(self.inner, name)


class HeldStreamMock(MockAPI):
    """The mock API, except that a stream is held half-way (see HoldingWriter).
    A proxy that buffered the reply would deliver no text until the hold
    times out, so the text arriving first proves chunk-by-chunk relay."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.finished = threading.Event()
        self.released_by_client = None

    def _send_stream(self, h, events, cut_after, headers):
        h.wfile = HoldingWriter(h.wfile, self)
        try:
            super()._send_stream(h, events, cut_after, headers)
        finally:
            self.finished.set()


def check_capture_and_relay():
    with MockAPI(["Hello from the mock."]) as mock, proxied(mock, quiet=False) as (server, folder):
        log = io.StringIO()
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(io.StringIO()):
            answer = sdk_client(server).messages.create(model=MODEL, max_tokens=64, messages=HELLO)
        checks.check("the reply comes back through the proxy", answer.content[0].text == "Hello from the mock.")
        files = sorted(p.name for p in folder.iterdir())
        checks.check("one request gives one captured/request-1.json", files == ["request-1.json"], files)
        record, text = load_capture(folder)
        checks.check("capture holds method and path", (record["method"], record["path"]) == ("POST", "/v1/messages"),
                     (record["method"], record["path"]))
        checks.check("capture holds the parsed JSON body (model, max_tokens, messages)",
                     record["body"] == {"model": MODEL, "max_tokens": 64, "messages": HELLO}, record["body"])
        hidden = secret_headers(record["headers"])
        checks.check("credential headers are redacted in the capture",
                     hidden and set(hidden.values()) == {proxy.REDACTED}, hidden)
        checks.check("the key itself appears nowhere in the capture file", SECRET not in text)
        sent = mock.requests[0]["headers"]
        checks.check("the upstream still receives the real key", any(SECRET in v for v in sent.values()))
        checks.check("Host is rewritten for the upstream, not copied", sent.get("host") == f"127.0.0.1:{mock.port}",
                     sent.get("host"))
        checks.check("a one-line capture notice is logged per request",
                     re.search(r"captured POST /v1/messages -> .*request-1\.json", log.getvalue()), log.getvalue())


def check_redacts_only_present_headers():
    with MockAPI(["ok"]) as mock, proxied(mock) as (server, folder):
        body = json.dumps({"model": MODEL, "max_tokens": 16, "messages": HELLO}).encode()
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("POST", "/v1/messages?beta=true", body=body, headers={
            "x-api-key": SECRET, "anthropic-oauth-token": "oauth-SECRET", "anthropic-version": "2023-06-01",
            "content-type": "application/json", "x-custom": "kept as is"})
        status = conn.getresponse().status
        conn.close()
        record, text = load_capture(folder)
        names = {k.lower(): v for k, v in record["headers"].items()}
        checks.check("x-api-key and anthropic-oauth-token are both redacted",
                     names.get("x-api-key") == names.get("anthropic-oauth-token") == proxy.REDACTED, names)
        checks.check("no Authorization header is invented when none was sent", "authorization" not in names)
        checks.check("other headers and the query string are kept",
                     names.get("x-custom") == "kept as is" and record["path"] == "/v1/messages?beta=true")
        checks.check("neither secret leaks into the capture", SECRET not in text and "oauth-SECRET" not in text)
        checks.check("the request was relayed and answered", status == 200 and len(mock.requests) == 1, status)


def check_streaming_relay():
    with HeldStreamMock(["Streaming straight through the proxy."]) as mock, proxied(mock) as (server, folder):
        first = None
        with sdk_client(server).messages.stream(model=MODEL, max_tokens=64, messages=HELLO) as stream:
            for event in stream:
                if event.type == "text" and first is None:
                    first = (event.text, mock.finished.is_set())
                    mock.release.set()
            final = stream.get_final_message()
        checks.check("first text event arrives while the upstream is still sending",
                     first is not None and first[1] is False and mock.released_by_client is True,
                     f"first={first}, released_by_client={mock.released_by_client}")
        checks.check("the streamed message is complete and correct",
                     final.content[0].text == "Streaming straight through the proxy."
                     and final.stop_reason == "end_turn", final)
        record, _ = load_capture(folder)
        checks.check("the streaming request is captured too", record["body"].get("stream") is True)


def check_errors_relayed():
    rate_limited = error(429, "slow down, mock", headers={"retry-after": "7"})
    with MockAPI([rate_limited]) as mock, proxied(mock) as (server, _):
        try:
            sdk_client(server).messages.create(model=MODEL, max_tokens=16, messages=HELLO)
            caught = None
        except anthropic.RateLimitError as exc:
            caught = exc
        checks.check("an error status, its message and headers are relayed",
                     caught is not None and "slow down, mock" in str(caught)
                     and caught.response.headers.get("retry-after") == "7", repr(caught))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    with proxied(f"http://127.0.0.1:{closed_port}") as (server, _):
        try:
            sdk_client(server).messages.create(model=MODEL, max_tokens=16, messages=HELLO)
            caught = None
        except anthropic.APIStatusError as exc:
            caught = exc
        checks.check("an unreachable upstream gives a readable 502",
                     caught is not None and caught.status_code == 502 and "could not reach" in str(caught), repr(caught))


def start_proxy_process(upstream: str, captures: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "proxy.py"), "--port", "0", "--upstream", upstream,
                             "--captures", str(captures)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    banner = proc.stdout.readline()
    found = re.search(r"127\.0\.0\.1:(\d+)", banner)
    return proc, (f"http://127.0.0.1:{found.group(1)}" if found else "")


def check_kesi_through_proxy():
    with MockAPI(["Hi, I am KeSi."]) as mock, tempfile.TemporaryDirectory(prefix="kesi-check-") as folder:
        captures = Path(folder) / "captured"
        proc, url = start_proxy_process(mock.url, captures)
        try:
            env = kesi_subprocess_env(mock, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=SECRET, KESI_SANDBOX="off")
            run = subprocess.run([sys.executable, str(ROOT / "kesi.py"), "-p", "say hi"], cwd=folder, env=env,
                                 capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
        checks.check("proxy.py starts and prints where it listens", url != "", "no port in the banner")
        checks.check("KeSi answers through the proxy", run.returncode == 0 and "Hi, I am KeSi." in run.stdout,
                     run.stdout + run.stderr[-1500:])
        try:       # KeSi asks the Models API (GET /v1/models/...) before its first message
            record, text = next(c for c in map(lambda n: load_capture(captures, n), (1, 2)) if c[0]["method"] == "POST")
        except OSError as exc:
            checks.check("KeSi's request is captured", False, exc)
            return
        body = record["body"]
        checks.check("KeSi's capture shows its whole request (system, tools, messages, stream)",
                     "say hi" in json.dumps(body["messages"][0]) and body.get("stream") is True
                     and body.get("system") and {t["name"] for t in body["tools"]} >= {"read_file", "task"}, body.keys())
        checks.check("KeSi's key is redacted in the capture", SECRET not in text and secret_headers(record["headers"]))
        checks.check("the proxy log has the capture line and the access line",
                     "captured POST /v1/messages" in out and '"POST /v1/messages HTTP/1.1" 200' in err, out + err)


check_capture_and_relay()
check_redacts_only_present_headers()
check_streaming_relay()
check_errors_relayed()
check_kesi_through_proxy()
sys.exit(checks.finish())
