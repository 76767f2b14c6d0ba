# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""A capture proxy for Messages API traffic (Day 02).

Point a client at it and every request is saved to captured/request-N.json
before it is passed on unchanged to the real API; the answer comes back
unchanged too, streamed responses included, chunk by chunk:

    uv run examples/day02/proxy.py
    ANTHROPIC_BASE_URL=http://127.0.0.1:9527 claude -p "say one sentence" --model haiku

Credentials are redacted in the capture only (the forwarded request keeps
them). Captures are still plain text on disk: review them before sharing.
Standard library only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_PORT = 9527
DEFAULT_UPSTREAM = "https://api.anthropic.com"
SECRET_HEADERS = {"authorization", "x-api-key", "anthropic-oauth-token"}
REDACTED = "<redacted>"
# Headers that describe one connection, not the message: never passed on.
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te",
              "trailer", "upgrade"}
NOT_FORWARDED = HOP_BY_HOP | {"host"}        # a copied Host would misroute the request
CHUNK_BYTES = 64 * 1024
UPSTREAM_TIMEOUT = 600                       # seconds; long generations stream slowly


def redact_headers(headers) -> dict:
    """A copy of the headers with secret values hidden. Only headers that are
    present are touched: redaction must never add one."""
    return {name: REDACTED if name.lower() in SECRET_HEADERS else value
            for name, value in headers.items()}


def parse_body(raw: bytes):
    """The body as JSON when it is JSON; otherwise its text (or None if empty)."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


class Captures:
    """Numbers the requests and writes one JSON file per request."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.count = 0
        self.lock = threading.Lock()           # handlers run in parallel threads

    def save(self, method: str, path: str, headers, raw: bytes) -> Path:
        with self.lock:
            self.count += 1
            target = self.folder / f"request-{self.count}.json"
        record = {"method": method, "path": path, "headers": redact_headers(headers),
                  "body": parse_body(raw)}
        target.write_text(json.dumps(record, ensure_ascii=False, indent=2), encoding="utf-8")
        return target


class Tap(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"            # keep-alive for normal replies
    server_version = "KeSiCaptureProxy/1.0"

    def log_message(self, format, *args) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)     # the access line, on stderr

    def do_POST(self) -> None:
        self.relay()

    def do_GET(self) -> None:
        self.relay()

    def relay(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        saved = self.server.captures.save(self.command, self.path, self.headers, raw)
        if not self.server.quiet:
            print(f"captured {self.command} {self.path} -> {saved}", flush=True)
        try:
            upstream = self.server.connect()
            upstream.request(self.command, self.server.upstream_path(self.path), body=raw,
                             headers=forwarded_headers(self.headers))
            response = upstream.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self.send_bad_gateway(exc)
            return
        try:
            self.send_reply(response)
        finally:
            upstream.close()

    def send_reply(self, response: http.client.HTTPResponse) -> None:
        self.send_response(response.status, response.reason)
        # Content-Encoding is copied too: the body stays compressed as it came.
        for name, value in response.getheaders():
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        # Framing belongs to each connection. A reply without a length (a
        # stream) is re-chunked for our client, so it can tell the end of the
        # reply, and a broken upstream shows up as an unfinished body.
        chunked = response.getheader("Content-Length") is None
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.copy_body(response, chunked)
        except (http.client.HTTPException, OSError):
            self.close_connection = True     # hang up without an end marker
            return
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def copy_body(self, response: http.client.HTTPResponse, chunked: bool) -> None:
        """Pass data on as soon as it arrives: read1 returns what one read
        delivered (one SSE event, say) instead of waiting to fill a buffer."""
        while chunk := response.read1(CHUNK_BYTES):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            self.wfile.flush()

    def send_bad_gateway(self, exc: Exception) -> None:
        message = f"capture proxy could not reach {self.server.upstream_url}: {exc}"
        payload = json.dumps({"type": "error", "error": {"type": "api_error", "message": message}}).encode()
        self.send_response(502)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


def forwarded_headers(headers) -> dict:
    return {name: value for name, value in headers.items() if name.lower() not in NOT_FORWARDED}


class CaptureProxy(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False       # idle keep-alive connections must not hold up a stop

    def __init__(self, port: int, upstream: str, captures: Path, quiet: bool = False):
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"upstream must be an http(s) URL, got {upstream!r}")
        super().__init__(("127.0.0.1", port), Tap)
        self.upstream_url = upstream
        self.upstream_parts = parts
        self.captures = Captures(captures)
        self.quiet = quiet                   # no log lines (when embedded in tests)

    @property
    def port(self) -> int:
        return self.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_in_background(self) -> "CaptureProxy":
        """Serve from a daemon thread (tests embed the proxy this way)."""
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def connect(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.upstream_parts.scheme == "https" else http.client.HTTPConnection
        return kind(self.upstream_parts.hostname, self.upstream_parts.port, timeout=UPSTREAM_TIMEOUT)

    def upstream_path(self, path: str) -> str:
        """An upstream URL may carry a path prefix (http://host/prefix)."""
        return self.upstream_parts.path.rstrip("/") + path


def parse_args(argv):
    parser = argparse.ArgumentParser(description="Capture and relay Messages API requests.")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    parser.add_argument("--upstream", default=DEFAULT_UPSTREAM, help="where requests are sent on")
    parser.add_argument("--captures", default="captured", help="folder for request-N.json files")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        proxy = CaptureProxy(args.port, args.upstream, Path(args.captures))
    except OSError as exc:
        print(f"proxy: cannot listen on 127.0.0.1:{args.port} ({exc}); try another --port", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"proxy: {exc}", file=sys.stderr)
        return 2
    print(f"proxy listening on 127.0.0.1:{proxy.port}, relaying to {args.upstream}; "
          f"captures in {args.captures}/; Ctrl-C stops it", flush=True)
    try:
        proxy.serve_forever()
    except KeyboardInterrupt:
        print("\nproxy stopped", file=sys.stderr)
    finally:
        proxy.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
