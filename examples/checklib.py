"""Shared plumbing for the per-chapter check scripts (examples/dayNN/check.py).

Each check script runs KeSi's real code against real files in a temporary
workspace and, where a model is involved, against the local mock Messages API
(examples/mock_api.py) through the real anthropic SDK. No key, no network.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import secrets
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "examples"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import anthropic  # noqa: E402

# Checks and tests press Ctrl-C by sending SIGINT to themselves. A shell starts
# background jobs (`pytest &`) with SIGINT ignored, and Python keeps it so;
# restore the usual handler so Ctrl-C raises KeyboardInterrupt however we were started.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Checks and tests keep KeSi's records (sessions, prompt history, audit log) in a folder of their own,
# never the user's ~/.local/state/kesi; child kesi.py processes inherit it.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="kesi-test-state-")

import kesi  # noqa: E402
from mock_api import MockAPI  # noqa: E402


def records_of(project) -> Path:
    """KeSi's records folder for a project folder (sessions/, audit.jsonl, prompt-history.jsonl)."""
    old = kesi.BASE_DIR
    kesi.BASE_DIR = Path(project).resolve()
    try:
        return kesi.records_folder()
    finally:
        kesi.BASE_DIR = old


class Checks:
    """Collects PASS/FAIL lines and ends with 'N passed, N failed'."""

    def __init__(self, title: str):
        self.title = title
        self.passed = self.failed = self.skipped = 0
        print(f"# {title}")

    def check(self, name: str, ok, detail="") -> bool:
        if ok:
            self.passed += 1
            print(f"PASS  {name}")
        else:
            self.failed += 1
            print(f"FAIL  {name}" + (f"\n      {detail}" if detail != "" else ""))
        return bool(ok)

    def skip(self, name: str, why: str) -> None:
        self.skipped += 1
        print(f"SKIP  {name} ({why})")

    def finish(self) -> int:
        line = f"{self.passed} passed, {self.failed} failed"
        if self.skipped:
            line += f", {self.skipped} skipped"
        print(line)
        return 0 if self.failed == 0 and self.passed > 0 else 1


def fresh_state() -> None:
    """Forget everything a previous check left in kesi's module state."""
    kesi.READ_VERSIONS.clear()
    kesi.GRANTED_COMMANDS.clear()
    kesi.GRANTED_WRITES.clear()
    kesi.GRANTED_ESCALATIONS.clear()
    kesi.ESCALATE_ONCE.clear()
    kesi.HEADLESS_ESCALATION = None
    kesi.TODOS.clear()
    kesi.METER.calls.clear()
    kesi.model_limits.cache_clear()               # each check's mock reports its own models
    kesi.CACHE_CLOCK = kesi.CacheClock()          # no pause remembered from an earlier check
    kesi.MAIN_AGENT.size_mark = kesi.SUB_AGENT.size_mark = None
    kesi.PERMISSION_MODE = "default"
    kesi.SESSION_FILE = None
    kesi._own_targets.clear()                     # where the previous check's config and records led
    kesi.MAIN_AGENT.echo = True
    kesi.UI = sys.stdout
    kesi.stop_background_tasks()
    kesi.BACKGROUND_TASKS.clear()
    kesi.MCP["revoked"] = False                   # an earlier check's /revoke asks nothing of the next
    if kesi.ADOPTING:                             # no longer the subreaper: later checks' orphans go to init again
        kesi.libc().prctl(36, 0, 0, 0, 0)         # PR_SET_CHILD_SUBREAPER
        kesi.ADOPTING = False
    forget_shared_network()


def forget_shared_network() -> None:
    """The next sandboxed command makes the session's loopback network anew."""
    for fd in kesi._shared_network:
        os.close(fd)
    kesi._shared_network.clear()


@contextlib.contextmanager
def sandbox_forced(kind):
    """Pretend the sandbox probe found `kind` ('bubblewrap', 'seatbelt' or None: off)."""
    saved = kesi.sandbox_kind
    kesi.sandbox_kind = lambda: kind
    try:
        yield
    finally:
        kesi.sandbox_kind = saved


def capture_ui() -> io.StringIO:
    """Collect KeSi's notices (tool lines, cost lines) in a buffer; fresh_state() undoes it."""
    kesi.UI = io.StringIO()
    return kesi.UI


def tool_results(messages: list[dict]) -> list[dict]:
    """Every tool_result block in a journal or in a request's messages."""
    return [b for m in messages if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


class ScriptedUser:
    """Stands in for ask_user, the person at the terminal: records every
    Question and answers from a list, then always with `then`.
    "y" allows once, "a" allows and saves the question's rule for this project
    (an escalation: for the session), "n" refuses, "n TEXT" refuses and says what to do instead."""

    def __init__(self, *answers, then: str = "n"):
        self.answers, self.then, self.questions = list(answers), then, []

    @property
    def asked(self) -> list[str]:
        """What each question said (its detail line), in order."""
        return [question.detail for question in self.questions]

    def __call__(self, question):
        self.questions.append(question)
        answer = self.answers.pop(0) if self.answers else self.then
        return answer in ("y", "a"), answer == "a" or answer.partition(" ")[2]


def tool_use(use_id: str, name: str, tool_input: dict) -> dict:
    """A tool_use block as the model sends it."""
    return {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}


def write_files(root: Path, files: dict) -> None:
    for rel, content in (files or {}).items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))


def use_base_dir(path) -> None:
    """Move KeSi's jail (checks and tests run in temporary folders); the
    files read in the old one no longer count as read."""
    kesi.BASE_DIR = Path(path).resolve()
    kesi.READ_VERSIONS.clear()


@contextlib.contextmanager
def workspace(files: dict | None = None):
    """A temporary folder holding files, made KeSi's jail for the duration."""
    old_base = kesi.BASE_DIR
    with tempfile.TemporaryDirectory(prefix="kesi-check-") as folder:
        root = Path(folder).resolve()
        write_files(root, files)
        fresh_state()
        use_base_dir(root)
        try:
            yield root
        finally:
            use_base_dir(old_base)


@contextlib.contextmanager
def mock_client(script=None, *, max_retries: int = 2, **mock_options):
    """Start the mock API and yield (mock, client) with the real SDK pointed at it."""
    with MockAPI(script, **mock_options) as mock:
        http = anthropic.DefaultHttpxClient(verify=shared_tls_context())     # the SDK's own defaults
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=max_retries, http_client=http)
        previous = kesi.CLIENT
        kesi.CLIENT = client
        try:
            yield mock, client
        finally:
            kesi.CLIENT = previous
            http.close()


@functools.cache
def shared_tls_context() -> ssl.SSLContext:
    """One TLS context for every mock client: loading the CA bundle anew costs tens of milliseconds a client,
    and the mock speaks plain HTTP anyway."""
    return ssl.create_default_context()


def kesi_subprocess_env(mock=None, **extra) -> dict:
    """Environment for running kesi.py as a child process against the mock."""
    env = with_bytecode_cache({k: v for k, v in os.environ.items()
                               if not k.startswith(("ANTHROPIC_", "KESI_"))})
    if mock is not None:
        env.update(mock.env())
    env.update(extra)
    return env


def with_bytecode_cache(env: dict) -> dict:
    """A copy of env whose child Pythons share one bytecode cache.

    Some machines set PYTHONDONTWRITEBYTECODE, so every child process would
    compile the whole anthropic SDK again (seconds per process)."""
    env = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / "kesi-pycache")
    return env


# --- processes: found by their process group and by a marker unique to this run ---------
# Several copies of the suite may run on one machine at once, so a check never
# looks for "a sleep 30" by name: the sleep carries random digits, and the
# processes KeSi started are followed through their own process group.

def unique_sleep(seconds: int = 30) -> str:
    """A `sleep` command line no other run on this machine has: sleep 30.<9 random digits>."""
    return f"sleep {seconds}.{secrets.randbelow(10 ** 9):09d}"


@contextlib.contextmanager
def started_commands():
    """Record the process groups KeSi starts (start_new_session=True) while inside."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    class RecordingPopen(real_popen):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            if kwargs.get("start_new_session"):
                started.append(self)

    subprocess.Popen = RecordingPopen
    try:
        yield started
    finally:
        subprocess.Popen = real_popen


def live_processes(pgids=(), markers=()) -> list[int]:
    """Pids of live (not zombie) processes in one of the process groups, or
    whose command line contains one of the markers."""
    pgids, markers, found = set(pgids), list(markers), []
    for pid, pgid, state, args in process_table():
        if state != "Z" and (pgid in pgids or any(m in args for m in markers)):
            found.append(pid)
    return found


def process_table():
    """(pid, pgid, state, command line) for every process this one can see."""
    if not os.path.isdir("/proc"):             # macOS: ps prints the same four columns
        listed = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "pgid=", "-o", "stat=", "-o", "args="],
                                capture_output=True, text=True).stdout
        for line in listed.splitlines():
            pid, pgid, state, *args = line.split(None, 3)
            yield int(pid), int(pgid), state[0], " ".join(args)
        return
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            state, _ppid, pgid = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue                           # it ended while we looked
        yield int(entry.name), int(pgid), state, args


def left_behind(started=(), markers=(), patience: float = 10.0) -> list[int]:
    """The processes of finished commands (their groups, or carrying a marker)
    still alive after `patience` seconds; [] when all are gone. A killed process
    may take a moment to go on a busy machine, so this waits; it fails only for
    a process that stays (the sleeps it looks for last 30 s)."""
    pgids = [proc.pid for proc in started]
    deadline = time.monotonic() + patience
    while (alive := live_processes(pgids, markers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive
