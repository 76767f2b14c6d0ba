import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
for folder in (ROOT, ROOT / "examples"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import io  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402

import checklib  # noqa: E402
import kesi  # noqa: E402
from ptyterm import Terminal  # noqa: E402

# Tests never reach the real API: a test that forgot to point the SDK at the
# mock fails fast against a closed local port instead of spending money.
for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
    os.environ.pop(name, None)
os.environ["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:9"
# Nor do they read the user's own KeSi settings (~/.config/kesi/env and
# ~/.config/kesi/settings.json): a fresh, empty config folder per run.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="kesi-test-config-")
# Every child Python (kesi.py, helper scripts) shares one bytecode cache: under PYTHONDONTWRITEBYTECODE
# each would compile the anthropic SDK anew, seconds a process (checklib.with_bytecode_cache).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.update(checklib.with_bytecode_cache({}))


@pytest.fixture
def ws(tmp_path):
    """A fresh workspace (the jail) with clean KeSi state."""
    root = tmp_path.resolve()
    old = kesi.BASE_DIR
    checklib.fresh_state()
    checklib.use_base_dir(root)
    yield root
    checklib.use_base_dir(old)
    checklib.fresh_state()


@pytest.fixture
def box(ws, monkeypatch):
    """A workspace whose commands run in real bubblewrap (skipped without it).
    A short grace period: these tests stop many commands, and the tasks they leave running are
    stopped here, still with it. ws's teardown forgets the tasks and the session's network."""
    if kesi.sandbox_kind() != "bubblewrap":
        pytest.skip("no usable bubblewrap here")
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 0.5)
    yield ws
    kesi.stop_background_tasks()


@pytest.fixture
def mock_client():
    """Factory: mock_client(script, **options) -> (mock, client); stopped after the test."""
    stack = []

    def start(script=None, **options):
        manager = checklib.mock_client(script, **options)
        stack.append(manager)
        return manager.__enter__()

    yield start
    for manager in reversed(stack):
        manager.__exit__(None, None, None)


@pytest.fixture
def user(monkeypatch):
    """Factory: user(*answers, then="n") puts a checklib.ScriptedUser at the keyboard."""
    def install(*answers, then="n"):
        scripted = checklib.ScriptedUser(*answers, then=then)
        monkeypatch.setattr(kesi, "ask_user", scripted)
        return scripted
    return install


@pytest.fixture
def notices(monkeypatch):
    """KeSi's UI notices (tool lines, warnings), collected in a buffer."""
    buffer = io.StringIO()
    monkeypatch.setattr(kesi, "UI", buffer)
    return buffer


@pytest.fixture
def user_settings(tmp_path_factory, monkeypatch):
    """Factory: user_settings(data) writes data as the user's own settings.json, in a config
    folder (XDG_CONFIG_HOME) of this test's, outside the workspace; returns that folder."""
    folder = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))

    def write(data: dict) -> Path:
        (folder / "kesi").mkdir(exist_ok=True)
        (folder / "kesi" / "settings.json").write_text(json.dumps(data))
        return folder
    return write


@pytest.fixture
def kesi_pty():
    """Factory: kesi_pty(folder, mock, *args, columns=200, **env) starts `kesi.py *args` on a real
    pty (examples/ptyterm.py) against the mock with the sandbox off (unless env says), its width from the pty's
    window; stopped after the test however it ends. `with` it, and end with term.leave()."""
    started = []

    def start(folder, mock, *args, columns: int = 200, **env) -> Terminal:
        env = checklib.kesi_subprocess_env(mock, **{"KESI_SANDBOX": "off", **env})
        env.pop("COLUMNS", None)
        started.append(Terminal([sys.executable, ROOT / "kesi.py", *args], folder, env, columns=columns))
        return started[-1]

    yield start
    for term in started:
        term.close(seconds=0)


@pytest.fixture
def main_in_process(ws, monkeypatch, capsys):
    """Call kesi.main(argv) in this process with piped stdin, against a mock.

    Starting Python and importing the SDK costs seconds, so only the tests whose subject is the
    process (its exit, signals, streams) start a real child; the rest drive the same main() here.
    Returns run(argv, stdin, mock, **env) -> (exit code, stdout, stderr).
    """
    saved_environ = dict(os.environ)     # main() may add keys from a .env file
    tool_names = [(agent, agent.tool_names) for agent in (kesi.MAIN_AGENT, kesi.SUB_AGENT)]

    def run(argv, stdin="", mock=None, **env):
        for name in list(os.environ):
            if name.startswith(("ANTHROPIC_", "KESI_")):
                monkeypatch.delenv(name)
        for name, value in {**(mock.env() if mock else {}), **env}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        for name in ("MODEL", "CLIENT", "PERMISSION_MODE", "SESSION_FILE", "MAX_TURNS", "MAX_BUDGET_USD",
                     "COMMAND_LINE_RULES", "MAX_TOKENS", "PRICE_OVERRIDE", "CONTEXT_WINDOW"):
            monkeypatch.setattr(kesi, name, getattr(kesi, name))
        monkeypatch.setattr(kesi, "UI", sys.stdout)
        monkeypatch.setattr(kesi.MAIN_AGENT, "echo", True)
        for agent, names in tool_names:          # each run starts with all tools (--disallowed-tools takes some)
            monkeypatch.setattr(agent, "tool_names", names)
        capsys.readouterr()
        try:
            code = kesi.main(argv)
        except SystemExit as exc:              # argparse's usage errors end the process so
            code = exc.code
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    os.environ.clear()
    os.environ.update(saved_environ)
