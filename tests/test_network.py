"""Network by allowlist, and escalation decided by the person.

Sandboxed commands reach the network only through KeSi's proxy. The tests
run a local HTTP server on 127.0.0.1 and map a test name to it with the
user's own "resolve" setting (as curl --resolve would), in a settings file in
a temporary XDG_CONFIG_HOME; nothing leaves the machine. Real bwrap commands
use curl and pip through the proxy; a real kesi.py answers the permission
prompt over a pty, and refuses to escalate when headless.
"""
import contextlib
import fcntl
import http.server
import io
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import kesi
from checklib import sandbox_forced
from local_index import build_wheel, simple_index
from mock_api import reply, tool_call
from test_permissions import KESI, Terminal, child_env
from test_sandbox import listener, outside, sandboxed, tcp_probe  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
TEST_HOST = "localtest.kesi"
needs_curl = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


class IndexServer(http.server.BaseHTTPRequestHandler):
    """/hello answers with the Host it was asked for; files maps other paths to
    bodies (a package index: local_index.simple_index); served lists what was asked."""
    files: dict = {}
    served: list = []

    def do_GET(self, head_only=False):
        self.served.append(self.path)
        body = self.files.get(self.path)
        if body is None and self.path == "/hello":
            body = f"hello via {self.headers['Host']}\n".encode()
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html" if self.path.endswith("/") else "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head_only:
            self.wfile.write(body)

    def do_HEAD(self):              # uv asks first whether a wheel can be read in ranges
        self.do_GET(head_only=True)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), IndexServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def config(user_settings):
    """settings(data): writes the user's settings.json; returns the config folder (conftest.py)."""
    return user_settings


@pytest.fixture
def allowed(server, config):
    """The test server, allowed by the user under TEST_HOST:port and mapped to 127.0.0.1."""
    config({"network": {"allow": [f"{TEST_HOST}:{server}"], "resolve": {TEST_HOST: "127.0.0.1"}}})
    return server


def sh(command: str) -> tuple[str, bool]:
    return kesi.run_command(command, timeout=60)


# --- the allowlist as data -------------------------------------------------------------

@pytest.mark.parametrize("entry, host, port, allowed", [
    ("pypi.org", "pypi.org", 443, True), ("pypi.org", "pypi.org", 80, True),
    ("pypi.org", "pypi.org", 22, False),                 # no port given: 80 and 443 only
    ("pypi.org", "evilpypi.org", 443, False), ("pypi.org", "pypi.org.evil.com", 443, False),
    ("*.example.com", "a.b.example.com", 443, True), ("*.example.com", "example.com", 443, False),
    ("*.example.com", "badexample.com", 443, False),
    ("host.test:8443", "host.test", 8443, True), ("host.test:8443", "host.test", 443, False),
    ("*", "anything.org", 443, True), ("*", "127.0.0.1", 443, False),      # no wildcard allows an address
    ("127.0.0.1:8000", "127.0.0.1", 8000, True), ("[::1]:80", "::1", 80, True),
    ("PyPI.org.", "pypi.org", 443, True), ("not a host", "not", 443, False),
])
def test_entry_matching(entry, host, port, allowed):
    assert kesi.entry_matches(entry, host, port, for_deny=False) is allowed


def test_host_names_are_normalised_and_odd_ones_refused():
    assert kesi.normal_host("PyPI.ORG.") == "pypi.org"
    assert kesi.normal_host("0:0:0:0:0:0:0:1") == "::1"
    for odd in ("a b", "évil.com", "x/y", "", "a..b"):
        assert kesi.normal_host(odd) is None, odd


def test_trust_user_settings_add_project_file_only_narrows(ws, config):
    config({"network": {"allow": ["mine.example"]},
            "projects": {str(ws): {"network": {"allow": ["this-project.example"]}},
                         "/elsewhere": {"network": {"allow": ["other-project.example"]}}}})
    (ws / ".kesi").mkdir()
    (ws / ".kesi" / "settings.json").write_text(json.dumps(
        {"network": {"allow": ["planted.example"], "deny": ["github.com"],
                     "resolve": {"pypi.org": "127.0.0.1"}}}))
    policy = kesi.network_policy()
    assert kesi.network_refusal("mine.example", 443, policy) is None
    assert kesi.network_refusal("this-project.example", 443, policy) is None
    assert kesi.network_refusal("pypi.org", 443, policy) is None                 # a default
    assert "not on the network allowlist" in kesi.network_refusal("other-project.example", 443, policy)
    assert "not on the network allowlist" in kesi.network_refusal("planted.example", 443, policy)
    assert "deny entry (github.com)" in kesi.network_refusal("github.com", 443, policy)
    assert policy.resolve == {}                 # a project file cannot point a name anywhere
    config({"network": {"defaults": False, "allow": ["only.example"]}})
    assert kesi.network_policy().allow == ("only.example",)


def test_names_that_lead_to_this_machine_are_refused(config):
    config({"network": {"allow": ["localhost", "127.0.0.1"], "resolve": {"mapped.test": "127.0.0.1"}}})
    policy = kesi.network_policy()
    assert kesi.network_refusal("localhost", 80, policy) is None
    addresses, reason = kesi.checked_addresses("localhost", 80, policy)
    assert addresses == [] and "this machine or to addresses not reachable on the internet" in reason
    assert kesi.checked_addresses("127.0.0.1", 80, policy) == (["127.0.0.1"], None)    # listed as an address
    assert kesi.checked_addresses("mapped.test", 80, policy) == (["127.0.0.1"], None)  # the user's mapping


@pytest.mark.parametrize("address", [
    "127.0.0.2", "10.1.2.3", "192.168.0.1", "169.254.169.254", "::1", "fe80::1", "0.0.0.0", "100.64.0.1",
    "198.18.0.1", "198.19.255.254", "192.0.0.8", "192.0.2.2", "203.0.113.9", "240.0.0.1", "224.0.1.1",
    "255.255.255.255", "fd00::2", "ff0e::1", "fec0::1", "2001:db8::1", "3fff::1", "5f00::1", "64:ff9b:1::1",
    "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::7f00:1", "2002:7f00:1::", "2002:a00:1::", "64:ff9b::a00:1",
    "64:ff9b::7f00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe", "::ffff:198.18.0.1",
    "::ffff:0:7f00:1", "::ffff:0:a00:1",                            # SIIT spellings of 127.0.0.1, 10.0.0.1 (rt25c)
    "100:0:0:1::1"])                                                # RFC 9780's dummy prefix (rt25l)
def test_addresses_not_reachable_on_the_internet_are_off_limits(address):
    assert kesi.is_off_limits(address)


@pytest.mark.parametrize("address", ["151.101.0.223", "2a04:4e42::223", "::ffff:151.101.0.223",
                                     "2002:9765:df::", "64:ff9b::9765:df"])
def test_public_addresses_of_other_machines_are_not(address):
    assert not kesi.is_off_limits(address)


def machine_address() -> str:
    """A non-loopback IPv4 address of this machine's own interfaces (SIOCGIFADDR), or skip."""
    for _, name in socket.if_nameindex():
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe, contextlib.suppress(OSError):
            packed = fcntl.ioctl(probe.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
            if not packed[20:24].startswith(b"\x7f"):
                return socket.inet_ntoa(packed[20:24])
    pytest.skip("this machine has no IPv4 address but loopback")


@pytest.fixture
def hosts(monkeypatch):
    """hosts(name=address): getaddrinfo answers these names so, as /etc/hosts would."""
    real, table = socket.getaddrinfo, {}

    def lookup(host, port, *args, **kwargs):
        if host in table:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (table[host], port))]
        return real(host, port, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    return table.update


@needs_curl
def test_an_allowed_name_for_this_machines_own_address_is_refused(sandboxed, config, hosts):
    """A host-only server on eth0's address, an allowed name that DNS maps to it: plain http and CONNECT
    get 403 (issue 25, class 1); so does an allowed name for 198.18.0.1 (benchmarking, not global)."""
    address = machine_address()
    httpd = http.server.ThreadingHTTPServer((address, 0), IndexServer)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    try:
        config({"network": {"allow": [f"*.corp.kesi:{port}", "bench.kesi"]}})
        hosts(**{"intranet.corp.kesi": address, "bench.kesi": "198.18.0.1"})
        assert urllib.request.urlopen(f"http://{address}:{port}/hello", timeout=10).status == 200   # it serves
        output, _ = sh(f"curl -sS http://intranet.corp.kesi:{port}/hello")
        assert "blocked intranet.corp.kesi" in output and "resolves only to this machine" in output, output
        output, failed = sh(f"curl -sS -p --max-time 20 http://intranet.corp.kesi:{port}/hello")
        assert failed and "CONNECT tunnel failed, response 403" in output, output
        output, _ = sh("curl -sS http://bench.kesi/")
        assert "blocked bench.kesi:80" in output, output
        assert IndexServer.served.count("/hello") == 1        # only the test's own request reached it
    finally:
        httpd.shutdown()
        httpd.server_close()


PUBLIC_ADDRESS_OF_THIS_MACHINE = r"""
import http.server, json, os, socket, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import kesi
address, other, made_local = sys.argv[2], sys.argv[3], sys.argv[4:]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
proxy = kesi.start_network_proxy("bubblewrap")        # before the address exists: no cache may miss it
before = kesi.is_off_limits(address)
for step in " ".join(made_local).split(" ; "):
    subprocess.run(["ip", *step.split()], check=True)
family = socket.AF_INET6 if ":" in address else socket.AF_INET
server = type("Server", (http.server.ThreadingHTTPServer,), {"address_family": family})
httpd = server(("::" if ":" in address else address, 8080), http.server.SimpleHTTPRequestHandler)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
real = socket.getaddrinfo
socket.getaddrinfo = lambda host, *a, **k: real(address if host == "public.kesi" else host, *a, **k)
answers = []
for head in (b"GET http://public.kesi:8080/ HTTP/1.1\r\n\r\n", b"CONNECT public.kesi:8080 HTTP/1.1\r\n\r\n"):
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)                        # a tunnel that was let through stays open
        client.connect(proxy.server_address)
        client.sendall(head)
        try:
            answers.append(client.recv(4096).decode())
        except TimeoutError:
            answers.append("no answer")
print(json.dumps({"before": before, "after": kesi.is_off_limits(address), "other": kesi.is_off_limits(other),
                  "answers": answers}))
"""


# An address on an interface; a range routed to this machine (IPv6 "AnyIP": it cannot be bound, yet the kernel
# delivers connections to it here).
@pytest.mark.parametrize("address, other, made_local", [
    ("8.8.4.4", "8.8.8.8", "addr add 8.8.4.4/32 dev lo"),
    ("2a00:1450::1", "2a01:4f8::1", "-6 route add local 2a00:1450::/32 dev lo"),
    ("2a00:1450::1", "2a01:4f8::1", "addr add fd00::2/64 dev lo nodad ; "
                                    "-6 route add local 2a00:1450::/32 dev lo")],
    ids=["interface", "local route", "local route beside another address"])
def test_a_public_address_of_this_machine_is_refused_even_if_added_later(tmp_path, config, address, other, made_local):
    """In a network namespace of its own (unshare -rn), the machine gets a public address after the proxy
    started; an allowed name that resolves to it is refused, by http and CONNECT."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        pytest.skip("needs unshare and ip")
    config({"network": {"allow": ["public.kesi:8080"]}})
    done = subprocess.run(["unshare", "-rn", sys.executable, "-c", PUBLIC_ADDRESS_OF_THIS_MACHINE, str(ROOT),
                           address, other, *made_local.split()], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    if done.returncode and "unshare" in done.stderr:
        pytest.skip(f"no user and network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert (seen["before"], seen["after"], seen["other"]) == (False, True, False)
    for answer in seen["answers"]:
        assert answer.startswith("HTTP/1.1 403") and "resolves only to this machine" in answer, answer


NUMERIC_SPELLINGS = r"""
import json, socket, sys
sys.path.insert(0, sys.argv[1])
import kesi
proxy = kesi.start_network_proxy("bubblewrap")
answers = {}
for host in sys.argv[2:]:
    for head in (f"CONNECT {host}:80 HTTP/1.1\r\n\r\n", f"GET http://{host}/ HTTP/1.1\r\n\r\n"):
        with socket.socket(socket.AF_UNIX) as client:
            client.settimeout(60)
            client.connect(proxy.server_address)
            client.sendall(head.encode())
            answers[head] = client.makefile("rb").read().decode()
print(json.dumps(answers))
"""


def test_no_wildcard_covers_a_number_the_resolver_reads_as_an_address(tmp_path, config):
    """16909060, 0x01020304, 1.2.772 are 1.2.3.4 to the resolver (inet_aton): "*" must not allow them as
    names (L5). In a network namespace of its own, where the proxy would fail to connect (502) if it tried."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare")
    config({"network": {"allow": ["*"]}})
    spellings = ["16909060", "0x01020304", "1.2.772", "0177.0.0.1", "0x7f.1", "16909060."]
    done = subprocess.run(["unshare", "-rn", sys.executable, "-c", NUMERIC_SPELLINGS, str(ROOT), *spellings],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    if done.returncode and "unshare" in done.stderr:
        pytest.skip(f"no user and network namespace here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    for head, answer in json.loads(done.stdout).items():
        assert answer.startswith("HTTP/1.1 403") and "not on the network allowlist" in answer, (head, answer)
    assert [kesi.normal_host(s) for s in spellings] == ["1.2.3.4"] * 3 + ["127.0.0.1"] * 2 + ["1.2.3.4"]


def proxy_answer(proxy, request: bytes) -> str:
    """The proxy's whole answer to one request; a 503 may close the connection before the request is read."""
    with socket.socket(socket.AF_UNIX) as client:
        client.connect(proxy.server_address)
        client.settimeout(20)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            client.sendall(request)
        try:
            return client.makefile("rb").read().decode()
        except ConnectionResetError:
            return "HTTP/1.1 503 (reset)"


def test_the_proxy_holds_at_most_its_cap_of_connections(ws):
    """4,000 idle connections once made 2,000 threads in KeSi: now one past the cap gets a 503 that
    says why, at once and without a thread, and a freed slot is usable again."""
    proxy = kesi.start_network_proxy("bubblewrap")
    threads, held = threading.active_count(), []
    try:
        for _ in range(kesi.MAX_PROXY_CONNECTIONS):
            held.append(socket.socket(socket.AF_UNIX))
            held[-1].connect(proxy.server_address)
        refused = []
        for _ in range(200):
            for _ in range(5):            # on a loaded machine a refusal is now and then cut off by a reset
                with socket.socket(socket.AF_UNIX) as extra, contextlib.suppress(ConnectionResetError):
                    extra.connect(proxy.server_address)           # blocking: the backlog is short
                    extra.settimeout(20)
                    refused.append(extra.makefile("rb").read().decode())
                    break
        assert all(r.startswith("HTTP/1.1 503") and f"{kesi.MAX_PROXY_CONNECTIONS} connections open" in r
                   for r in refused), refused[0]
        assert threading.active_count() - threads <= kesi.MAX_PROXY_CONNECTIONS
        held.pop().close()
        assert_a_slot_comes_back(proxy)
    finally:
        for client in held:
            client.close()
        proxy.shutdown()
        proxy.server_close()


def assert_a_slot_comes_back(proxy) -> None:
    for _ in range(200):                      # the slot is released once its thread has ended
        answer = proxy_answer(proxy, b"GET http://blocked.kesi/ HTTP/1.1\r\n\r\n")
        if not answer.startswith("HTTP/1.1 503"):
            break
        time.sleep(0.05)
    assert answer.startswith("HTTP/1.1 403"), answer


def test_a_request_head_sent_a_byte_at_a_time_loses_its_slot_at_the_deadline(ws, config, monkeypatch):
    """Every slot was held by a client that sent one byte of its request head every 20 s: the read timeout was per
    read, so the slots never came back and later commands had no network (rt25 33). The head has one deadline."""
    monkeypatch.setattr(kesi, "PROXY_HEAD_SECONDS", 2)
    proxy = kesi.start_network_proxy("bubblewrap")
    slow, stop = [], threading.Event()

    def trickle():                             # a byte every 0.5 s, each within any per-read timeout
        while not stop.wait(0.5):
            for client in slow:
                with contextlib.suppress(OSError):
                    client.send(b"G")
    try:
        for _ in range(kesi.MAX_PROXY_CONNECTIONS):
            slow.append(socket.socket(socket.AF_UNIX))
            slow[-1].connect(proxy.server_address)
        threading.Thread(target=trickle, daemon=True).start()
        for client in slow:
            client.settimeout(30)
            client.makefile("rb").read()          # returns once the proxy closes it; times out if it never does
        assert_a_slot_comes_back(proxy)
    finally:
        stop.set()
        for client in slow:
            client.close()
        proxy.shutdown()
        proxy.server_close()


@pytest.mark.parametrize("end", ["closed", "half-closed and kept"])
def test_a_tunnel_frees_its_slot_once_the_commands_end_of_it_is_gone(ws, config, monkeypatch, end):
    """A task opened as many tunnels as the cap allows to a server that never closes, then ended: each slot was
    held for the rest of the session, so no later command had a network (rt25b 29). Once KeSi's end of a tunnel
    is closed both ways, the server side is closed too and the slot is free; a task that keeps its end only
    half-closed (rt25d 2-3: the forwarder keeps it so) gets PROXY_LINGER_SECONDS of the server's silence."""
    monkeypatch.setattr(kesi, "PROXY_LINGER_SECONDS", 1)
    silent, kept = socket.create_server(("127.0.0.1", 0)), []
    port = silent.getsockname()[1]
    def accept_all():
        with contextlib.suppress(OSError):           # the test closes it: then this ends, quietly
            while True:
                kept.append(silent.accept())
    threading.Thread(target=accept_all, daemon=True).start()
    config({"network": {"allow": [f"{TEST_HOST}:{port}"], "resolve": {TEST_HOST: "127.0.0.1"}}})
    proxy, held = kesi.start_network_proxy("bubblewrap"), []
    try:
        for _ in range(kesi.MAX_PROXY_CONNECTIONS):
            tunnel = socket.socket(socket.AF_UNIX)
            tunnel.connect(proxy.server_address)
            tunnel.settimeout(20)
            tunnel.sendall(f"CONNECT {TEST_HOST}:{port} HTTP/1.1\r\n\r\n".encode())
            assert tunnel.recv(100).startswith(b"HTTP/1.1 200"), "the tunnel did not open"
            if end == "closed":
                tunnel.close()
            else:
                tunnel.shutdown(socket.SHUT_WR)
                held.append(tunnel)
        deadline = time.monotonic() + 60
        while True:
            answer = proxy_answer(proxy, b"GET http://blocked.kesi/ HTTP/1.1\r\n\r\n")
            if not answer.startswith("HTTP/1.1 503") or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert answer.startswith("HTTP/1.1 403"), answer
    finally:
        for tunnel in held:
            tunnel.close()
        proxy.shutdown()
        proxy.server_close()
        silent.close()


def test_a_tunnel_stuck_on_a_server_that_never_reads_ends_with_its_command(ws, config):
    """The proxy's thread waited in a send to a server that never reads, so the slot stayed taken after the
    command closed its end (rt25c 6-7). Now the command's end closing both ways ends the tunnel."""
    silent = socket.create_server(("127.0.0.1", 0))         # never accepts: the kernel queues what arrives
    config({"network": {"allow": [f"{TEST_HOST}:{silent.getsockname()[1]}"], "resolve": {TEST_HOST: "127.0.0.1"}}})
    proxy = kesi.start_network_proxy("bubblewrap")
    before = set(threading.enumerate())

    def tunnel_threads() -> list:
        return [thread for thread in threading.enumerate() if thread not in before]
    try:
        with socket.socket(socket.AF_UNIX) as tunnel:
            tunnel.connect(proxy.server_address)
            tunnel.settimeout(20)
            tunnel.sendall(f"CONNECT {TEST_HOST}:{silent.getsockname()[1]} HTTP/1.1\r\n\r\n".encode())
            assert tunnel.recv(100).startswith(b"HTTP/1.1 200"), "the tunnel did not open"
            tunnel.settimeout(3)
            with contextlib.suppress(TimeoutError):             # until every buffer on the way is full
                for _ in range(4096):
                    tunnel.sendall(bytes(65536))
            assert tunnel_threads()
        deadline = time.monotonic() + 60
        while tunnel_threads() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not tunnel_threads(), "the tunnel's threads still wait on the server"
    finally:
        proxy.shutdown()
        proxy.server_close()
        silent.close()


@pytest.mark.parametrize("head, problem", [
    (b"GET http://a.example/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked",
     "more than one way"),
    (b"POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4", "more than one way"),
    (b"GET http://a.example/ HTTP/1.1\r\nX: 1\r\n folded", "malformed"),
    (b"GET http://a.example/ HTTP/1.1\r\nX: 1\nHost: b.example", "malformed"),
    (b"GET http://a.example/ HTTP/1.1\r\nX : 1", "malformed"),
    (b"GET https://a.example/ HTTP/1.1", "CONNECT"),
    (b"GET /relative HTTP/1.1\r\nHost: a.example", "absolute http://"),
    (b"GET http://user@a.example/ HTTP/1.1", "without user name"),
    (b"CONNECT a.example HTTP/1.1", "host:port"),
    (b"GET http://a.example/ HTTP/2", "not HTTP/1.x"),
])
def test_requests_another_server_could_read_differently_are_refused(head, problem):
    request, why = kesi.parse_proxy_request(head)
    assert request is None and problem in why


def test_http_request_is_rewritten_for_the_one_checked_host():
    request, _ = kesi.parse_proxy_request(
        b"GET http://A.Example:8080/p?q=1 HTTP/1.1\r\nHost: other.example\r\nProxy-Authorization: x\r\n"
        b"Connection: keep-alive\r\nAccept: */*")
    assert (request.host, request.port) == ("a.example", 8080)
    assert request.upstream_head == (b"GET /p?q=1 HTTP/1.1\r\nHost: a.example:8080\r\nAccept: */*\r\n"
                                     b"Connection: close\r\n\r\n")


# --- real commands in bwrap, through the proxy -------------------------------------------

@needs_curl
def test_allowed_host_is_reached_through_the_proxy(sandboxed, allowed):
    output, failed = sh(f"curl -sS http://{TEST_HOST}:{allowed}/hello")
    assert not failed and output.startswith(f"hello via {TEST_HOST}:{allowed}\n"), output
    # https goes through CONNECT: the tunnel to the allowed host:port opens.
    output, failed = sh(f"curl -sS -o /dev/null -w '%{{http_connect}}' -p --max-time 20 "
                        f"http://{TEST_HOST}:{allowed}/hello")
    assert not failed and output.startswith("200"), output


@needs_curl
def test_other_hosts_get_a_403_that_says_why(sandboxed, allowed):
    output, failed = sh(f"curl -sS http://blocked.kesi:{allowed}/hello")
    assert "KeSi's network allowlist blocked blocked.kesi:" in output and "not on the network allowlist" in output
    assert "(the network allowlist blocked blocked.kesi:" in output     # the note for the model
    # The allowed name on another port, the server's address itself, and a CONNECT to port 22.
    for url in (f"http://{TEST_HOST}:{allowed + 1}/hello", f"http://127.0.0.1:{allowed}/hello"):
        output, _ = sh(f"curl -sS --noproxy '' --proxy \"$HTTP_PROXY\" {url}")
        assert "KeSi's network allowlist blocked" in output and "hello via" not in output, output
    output, failed = sh(f"curl -sS -p --max-time 20 http://{TEST_HOST}:22/")
    assert failed and "CONNECT tunnel failed, response 403" in output, output


FLOOD = r"""
import os, socket, sys
host, port = os.environ["HTTP_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
for i in range(int(sys.argv[1])):
    with socket.create_connection((host, int(port))) as proxy:
        proxy.sendall(f"GET http://h{i}.kesi/ HTTP/1.1\r\nHost: h{i}.kesi\r\n\r\n".encode())
        while proxy.recv(65536):
            pass
print("sent", i + 1)
"""


def test_a_flood_of_refused_requests_costs_kesi_no_memory(sandboxed, config):
    """Every refused host:port was kept for the session: a task's flood of them grew KeSi without bound (rt25f 9).
    Only the latest are kept, which the note to the model names."""
    config({"network": {"allow": ["allowed.kesi"]}})
    (sandboxed / "flood.py").write_text(FLOOD)
    output, _ = sh("python3 flood.py 1500")
    assert "sent 1500" in output and "(the network allowlist blocked h" in output, output
    assert len(kesi.NETWORK_BLOCKED) < 1500, len(kesi.NETWORK_BLOCKED)


SQUATTER = r"""
import socket, sys, time
while True:                       # wait for the port, as an attacker would
    try:
        server = socket.create_server(("127.0.0.1", int(sys.argv[1])))
        break
    except OSError:
        time.sleep(0.05)
print("listening", flush=True)
while True:
    client, _ = server.accept()
    client.recv(4096)
    client.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 8\r\n\r\nSQUATTED")
    client.close()
"""


@needs_curl
def test_a_server_left_on_the_proxy_port_sees_no_later_request(sandboxed, allowed):
    """The session's commands share one loopback: a background task that
    takes the port where the proxy listened (once an earlier task that held
    it is gone) must not become the proxy for later commands."""
    (sandboxed / "squat.py").write_text(SQUATTER)
    try:
        kesi.run_command("sleep 1", run_in_background=True)
        started, _ = kesi.run_command(f"python3 squat.py {kesi.PROXY_PORT}", run_in_background=True)
        task = int(re.search(r"\d+", started).group())
        seen = ""
        for _ in range(300):
            seen += kesi.background_output(task)[0]          # each call returns what is new
            if "listening" in seen:
                break
            time.sleep(0.1)
        assert "listening" in seen, seen
        output, failed = sh(f"curl -sS http://{TEST_HOST}:{allowed}/hello; echo \"$HTTP_PROXY\"")
        assert not failed and "SQUATTED" not in output and f"hello via {TEST_HOST}:{allowed}" in output, output
        assert f"127.0.0.1:{kesi.PROXY_PORT}" not in output          # the forwarder's own port, not the written one
    finally:
        kesi.stop_background_tasks()


@needs_curl
def test_a_direct_connection_fails(sandboxed, allowed):
    output, failed = sh(f"curl -sS --noproxy '*' --max-time 20 http://127.0.0.1:{allowed}/hello")
    assert failed and "hello via" not in output, output
    output, failed = sh(tcp_probe(allowed))
    assert failed and "connected" not in output


def test_pip_downloads_from_an_allowed_index(sandboxed, allowed, tmp_path_factory, monkeypatch):
    python = kesi.forwarder_python()
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        pytest.skip("no pip for the sandbox's python")
    wheel = build_wheel(tmp_path_factory.mktemp("wheel"))
    monkeypatch.setattr(IndexServer, "files", simple_index([wheel]))
    output, failed = sh(f"{python} -m pip --isolated download --no-cache-dir --no-deps --disable-pip-version-check "
                        f"--index-url http://{TEST_HOST}:{allowed}/simple/ --trusted-host {TEST_HOST} "
                        "-d downloads kesidemo")
    assert not failed, output
    assert (sandboxed / "downloads" / wheel.name).read_bytes() == wheel.read_bytes()


# --- escalation, decided by the person ---------------------------------------------------

def test_the_model_can_only_ask_to_leave_the_sandbox(ws, user, monkeypatch):
    spec = next(t for t in kesi.TOOLS if t["name"] == "run_command")
    assert spec["input_schema"]["properties"]["escalate"]["enum"] == ["network", "unsandboxed"]
    problem = kesi.argument_problem("run_command", {"command": "ls", "sandbox": False})
    assert problem and "wrong arguments" in problem
    for bad in ({"escalate": "root"}, {"escalate": "network", "run_in_background": True}):
        assert kesi.check_permission("run_command", {"command": "ls", **bad}) == (
            False, 'Error: escalate is "network" or "unsandboxed", and not for a background command.')
    person = user("n", "y")
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    for mode in ("bypassPermissions", "auto"):     # leaving the sandbox is its own question in every mode
        monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
        with sandbox_forced("bubblewrap"):
            kesi.check_permission("run_command", {"command": "ls", "escalate": "unsandboxed"})
    assert person.asked == ["run command without the sandbox, with your full user rights: ls"] * 2
    assert kesi.ESCALATE_ONCE == {"ls": "unsandboxed"}
    with sandbox_forced(None):                     # no sandbox to leave: the usual decision
        assert kesi.check_permission("run_command", {"command": "ls", "escalate": "network"}) == (True, None)
    assert len(person.asked) == 2


def test_escalation_once_and_for_the_session(sandboxed, monkeypatch, listener):
    answers = [False, True]
    asked = []

    def person(question):
        asked.append(question.detail)
        return True, answers.pop(0)
    monkeypatch.setattr(kesi, "ask_user", person)
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    probe = tcp_probe(listener)

    def run() -> str:
        allowed, _ = kesi.check_command_permission(probe, escalate="network")
        assert allowed
        return sh(probe)[0]
    assert "connected" in run()                  # once: the full network
    assert "connected" not in sh(probe)[0]       # the next run is sandboxed again (no new answer)
    assert "connected" in run() and "connected" in run()    # for the session: asked once more, then not
    assert asked == [f"run command with this machine's network and its local services (files still sandboxed): {probe}"] * 2
    assert kesi.GRANTED_ESCALATIONS == {probe: "network"}
    kesi.handle_slash("/revoke", None, [])
    assert kesi.GRANTED_ESCALATIONS == {} and "connected" not in sh(probe)[0]


def test_unsandboxed_escalation_reaches_outside_the_workspace(sandboxed, outside):
    command = f"cat '{outside}/secret.txt'"
    assert "home secret" not in sh(command)[0]
    kesi.grant_escalation(command, "unsandboxed", False)
    assert sh(command)[0].startswith("home secret")
    assert "home secret" not in sh(command)[0]


@pytest.mark.parametrize("mode", ["readOnly", "plan"])
def test_a_read_only_command_granted_outside_runs_sandboxed_in_a_read_only_mode(sandboxed, monkeypatch, mode):
    """rt37a 3: `a` to leaving the sandbox, for a command the classifier calls read-only; after /mode readOnly or
    plan the model sent it again without `escalate`: allowed as read-only, and run outside with the session grant."""
    (sandboxed / ".env").write_text("API_TOKEN=sixteen\n")           # 18 bytes outside; empty inside
    command = "du -ab"
    assert kesi.classify_command(command)[0] == "allow"
    kesi.grant_escalation(command, "unsandboxed", True)
    call = [{"type": "tool_use", "id": "t1", "name": "run_command", "input": {"command": command}}]
    assert "18\t./.env" in kesi.run_tools(call, kesi.MAIN_AGENT)[0][0]["content"]      # the grant counts here
    monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
    result = kesi.run_tools(call, kesi.MAIN_AGENT)[0][0]["content"]
    assert "0\t./.env" in result and "18\t./.env" not in result, result


def test_a_once_only_answer_is_used_up_by_a_call_refused_for_its_input(sandboxed, monkeypatch, notices):
    """rt37a 19: `y` to leaving the sandbox once, for a call then refused for its timeout: the answer stayed, and the
    person's own `!du -ab` later (in readOnly mode) ran outside the sandbox with it."""
    (sandboxed / ".env").write_text("API_TOKEN=sixteen\n")           # 18 bytes outside; empty inside
    kesi.grant_escalation("du -ab", "unsandboxed", False)
    output, failed = kesi.run_command("du -ab", timeout=-1)
    assert failed and "timeout" in output
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    note = kesi.run_typed_command("du -ab")
    assert "0\t./.env" in note and "18\t./.env" not in note, note


def test_leaving_the_sandbox_once_at_a_real_prompt(sandboxed, mock_client, listener, config):
    folder = config({})
    probe = tcp_probe(listener)
    mock, _ = mock_client([reply(tool_call("run_command", {"command": probe, "escalate": "network"})),
                           reply("done")] * 2)
    with Terminal([sys.executable, KESI], sandboxed, child_env(mock, TERM="dumb", XDG_CONFIG_HOME=str(folder))) as term:
        term.expect("network:   only allowed hosts, through KeSi's proxy")
        for answer in ("y", "n"):
            term.expect("you > ")
            term.type(f"connect ({answer})\n")
            term.expect("run command with this machine's network and its local services (files still sandboxed)")
            term.expect("a = yes, and don't ask again: this exact command, for this session / n = no")
            term.type(answer + "\n")
            term.expect("KeSi > done")
        term.expect("you > ")
        term.type("/exit\n")
        term.close()
    results = [mock.requests[n]["body"]["messages"][-1]["content"][0] for n in (1, 3)]
    assert "connected" in results[0]["content"] and not results[0]["is_error"], results[0]
    assert results[1]["content"] == kesi.USER_REFUSED
    assert "runs with this machine's network and its local services (files still sandboxed), this once" in term.seen


def test_a_key_typed_before_a_question_never_answers_it(sandboxed, mock_client, config):
    """rt37c 34: `y` typed twice at a command's question; the second answered the model's next one, to run a command
    without the sandbox, unseen. Keys typed before a question shows are dropped."""
    folder = config({})
    calls = [reply(tool_call("run_command", {"command": "touch first"})),
             reply(tool_call("run_command", {"command": "touch second", "escalate": "unsandboxed"})), reply("done")]
    mock, _ = mock_client(calls)
    with Terminal([sys.executable, KESI], sandboxed, child_env(mock, TERM="dumb", XDG_CONFIG_HOME=str(folder))) as term:
        term.expect("you > ")
        term.type("go\n")
        term.expect("Allow? [")
        term.type("y\ny\n")                 # the second y, typed ahead, must not reach the next question
        term.expect("run command without the sandbox, with your full user rights: touch second")
        term.expect("Allow? [")
        term.type("n\n")
        term.expect("KeSi > done")
        term.expect("you > ")
        term.type("/exit\n")
        term.close()
    assert (sandboxed / "first").exists() and not (sandboxed / "second").exists()
    assert mock.requests[2]["body"]["messages"][-1]["content"][0]["content"] == kesi.USER_REFUSED


def test_headless_never_escalates_unless_the_flag_says_so(sandboxed, mock_client, listener, config):
    folder = config({})
    probe = tcp_probe(listener)
    mock, _ = mock_client([reply(tool_call("run_command", {"command": probe})), reply("done")] * 2)
    env = child_env(mock, XDG_CONFIG_HOME=str(folder))
    base = [sys.executable, KESI, "-p", "connect", "--permission-mode", "bypassPermissions"]
    plain = subprocess.run(base, cwd=sandboxed, env=env, capture_output=True, text=True, timeout=60)
    flagged = subprocess.run(base + ["--escalate", "network"], cwd=sandboxed, env=env,
                             capture_output=True, text=True, timeout=60)
    assert plain.returncode == flagged.returncode == 0, plain.stderr + flagged.stderr
    results = [mock.requests[n]["body"]["messages"][-1]["content"][0]["content"] for n in (1, 3)]
    assert "connected" not in results[0] and "connected" in results[1], results
    assert "--escalate network: every command of this run runs with this machine's network" in flagged.stderr
    refused = subprocess.run([sys.executable, KESI, "--escalate", "network"], cwd=sandboxed, env=env,
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--escalate is for -p runs only" in refused.stderr


# --- what the person and the model are told ------------------------------------------------

def test_system_prompt_states_the_network_policy(sandboxed, config):
    config({"network": {"allow": ["extra.example"]}})
    block = kesi.environment_block()
    assert "Network for commands: only through KeSi's proxy" in block
    assert "pypi.org" in block and "extra.example" in block
    assert "have no network" not in block


def test_seatbelt_allows_only_the_proxy_port(ws):
    with sandbox_forced("seatbelt"):
        profile, _ = kesi.sandbox_spec()
        port = kesi.network_proxy().server_address[1]
        escalated, _ = kesi.sandbox_spec(full_network=True)
    lines = profile.splitlines()
    network = [line for line in lines if "network" in line]
    assert network == ["(deny network*)", f'(allow network-outbound (remote ip "localhost:{port}"))']
    assert not any("network" in line for line in escalated.splitlines())


def test_network_command_lists_the_policy(ws, config, monkeypatch):
    config({"network": {"allow": ["extra.example"], "deny": ["gitlab.com"]}})
    (ws / ".kesi").mkdir()
    (ws / ".kesi" / "settings.json").write_text(json.dumps({"network": {"allow": ["planted.example"]}}))
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    with sandbox_forced("bubblewrap"):
        kesi.handle_slash("/network", None, [])
    text = shown.getvalue()
    assert "allowed hosts: pypi.org," in text and "extra.example" in text
    assert "denied hosts:  gitlab.com" in text and "planted.example" not in text.split("ignored")[0]
    assert "allow\" hosts in .kesi/settings.json are ignored" in text


def test_a_projects_rule_or_host_with_a_line_break_draws_no_row_of_its_own(ws, config, monkeypatch):
    """rt37c 15-16: /permissions and /network showed a project's deny rule or host with its line breaks, so one
    entry drew rows such as `deny  Bash(git push:*)` or `denied hosts:  github.com` that KeSi never applied."""
    config({})
    (ws / ".kesi").mkdir()
    fake_rule = "Bash(zzz)\n    deny  Bash(git push:*)   from .kesi/settings.json"
    fake_host = "nothing.invalid\n    denied hosts:  github.com"
    (ws / ".kesi" / "settings.json").write_text(json.dumps({"permissions": {"deny": [fake_rule]},
                                                            "network": {"deny": [fake_host]}}))
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    with sandbox_forced("bubblewrap"):
        kesi.handle_slash("/permissions", None, [])
        kesi.handle_slash("/network", None, [])
        kesi.refuse(fake_rule, "")
    rows = [row.strip() for row in shown.getvalue().splitlines()]
    assert not [row for row in rows if row.startswith(("deny  Bash(git push", "denied hosts:  github.com"))], rows
    assert any("Bash(zzz)\\n" in row for row in rows) and any("nothing.invalid\\n" in row for row in rows), rows


def test_a_padded_rule_or_host_is_cut_by_kesi_not_wrapped_by_the_terminal(ws, config, monkeypatch):
    """rt37d B3, rt37f 12: a deny rule padded with spaces to the terminal's width; the terminal's own wrap began a row
    `deny  Bash(git push:*)` of a rule that does not exist. KeSi cuts such rows itself, each piece marked."""
    config({})
    monkeypatch.setattr(kesi, "terminal_width", lambda: 80)
    (ws / ".kesi").mkdir()
    padded = "Bash(curl:*" + " " * 70 + "deny  Bash(git push:*)   from .kesi/settings.json)"
    (ws / ".kesi" / "settings.json").write_text(json.dumps({"permissions": {"deny": [padded]},
                                                            "network": {"deny": ["x.invalid" + " " * 80 + "y"]}}))
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    with sandbox_forced("bubblewrap"):
        kesi.handle_slash("/permissions", None, [])
        kesi.handle_slash("/network", None, [])
        kesi.refuse(f"deny rule {padded}", "")          # rt37g B5: the [blocked] notice quotes the rule
    rows = shown.getvalue().splitlines()
    assert not [line for line in rows if kesi.display_width(line) >= 80 and ("curl" in line or "x.invalid" in line)]
    assert [line[:8] for line in rows if "deny  Bash(git push" in line] == [kesi.ROW_MARK[:8]] * 2, rows
    assert not [line for line in rows if line.lstrip().startswith("deny  Bash(git push")], rows


def test_python_run_outside_the_sandbox_keeps_its_bytecode_where_no_command_writes(sandboxed, monkeypatch):
    """rt25n: a sandboxed command planted an unchecked .pyc in __pycache__; an escalated `python3 main.py` ran it."""
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)          # the tests' shared cache: a person has none
    kesi.set_headless_escalation("unsandboxed")
    try:
        output, _ = kesi.run_command("python3 -c 'import sys; print(sys.pycache_prefix)'")
    finally:
        kesi.set_headless_escalation(None)
    prefix = output.split()[0]
    assert prefix.startswith("/") and str(sandboxed) not in prefix, output
