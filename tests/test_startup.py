"""Start-up and exit: the SDK is imported in a background thread, so the
REPL takes a prompt before `import anthropic` has finished; headless mode
leaves as soon as its output is flushed, with the exit handlers run.

The slow import is made real, not simulated by timing: an `anthropic`
package placed first on PYTHONPATH waits for a gate file, then loads the
real SDK. No test measures a duration (examples/bench/startup.py does)."""
import os
import subprocess
import sys
import time

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call
from ptyterm import Terminal

KESI = checklib.ROOT / "kesi.py"

GATED_SDK = '''
import importlib, os, sys, time
gate = os.environ["KESI_TEST_SDK_GATE"]
for _ in range(6000):                      # at most about 2 minutes
    if os.path.exists(gate):
        break
    time.sleep(0.02)
shim = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != shim]
del sys.modules["anthropic"]
sys.modules["anthropic"] = importlib.import_module("anthropic")   # the real SDK takes this name
'''


@pytest.fixture
def gated_sdk(tmp_path):
    shim = tmp_path / "shim"
    (shim / "anthropic").mkdir(parents=True)
    (shim / "anthropic" / "__init__.py").write_text(GATED_SDK)
    gate = tmp_path / f"gate-{os.getpid()}-{time.time_ns()}"
    return shim, gate


def env_for(mock, shim=None, gate=None, **extra) -> dict:
    env = checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off", **extra)
    if shim:
        env["PYTHONPATH"] = os.pathsep.join([str(shim), env.get("PYTHONPATH", "")])
        env["KESI_TEST_SDK_GATE"] = str(gate)
    return env


def test_the_repl_takes_a_prompt_before_the_sdk_has_loaded(tmp_path, gated_sdk):
    shim, gate = gated_sdk
    with MockAPI(["(mock) hello after the import"]) as mock:
        term = Terminal([sys.executable, KESI], tmp_path, env_for(mock, shim, gate, TERM="dumb"))
        try:
            seen = term.wait_for(b"you > ")            # the gate is still closed
            assert not gate.exists() and mock.requests == []
            term.type(b"hello\r")
            time.sleep(0.5)                             # room for a wrong early request (none may come)
            assert mock.requests == []
            gate.write_text("open")
            seen = term.wait_for(b"(mock) hello after the import", after=seen)
            term.wait_for(b"you > ", after=seen)
            term.type(b"/exit\r")
            assert term.proc.wait(timeout=60) == 0
        finally:
            term.close()
    assert len(mock.requests) == 1 and mock.requests[0]["status"] == 200


def test_headless_waits_for_the_sdk_and_answers(tmp_path, gated_sdk):
    shim, gate = gated_sdk
    gate.write_text("open")
    with MockAPI(["(mock) headless answer"]) as mock:
        proc = subprocess.run([sys.executable, str(KESI), "-p", "hi"], cwd=tmp_path, env=env_for(mock, shim, gate),
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "(mock) headless answer\n"


def test_a_long_headless_answer_arrives_whole_through_a_pipe(tmp_path):
    """The process ends without the interpreter's teardown: only after stdout is flushed."""
    # About 570 kB, nine pipe buffers, in 2,000 lines of one word each: the mock streams a word a delta,
    # and 100,000 deltas took the SDK seconds while proving nothing more.
    answer = "".join(f"line-{i:04d}:{'long-answer-' * 23}\n" for i in range(2_000))
    with MockAPI([answer]) as mock:
        proc = subprocess.run([sys.executable, str(KESI), "-p", "write a lot"], cwd=tmp_path,
                              env=env_for(mock), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == answer + "\n"
    assert "this turn: 1 request" in proc.stderr


def test_exit_handlers_still_run_in_headless_mode(tmp_path):
    """bwrap's deny files live in a temp folder removed at exit; a fast exit must not leave it."""
    if kesi.sandbox_kind() != "bubblewrap":
        pytest.skip("needs bubblewrap")
    temp = tmp_path / "tmp"
    temp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    script = [reply(tool_call("run_command", {"command": "echo sandboxed"})), "(mock) ran it"]
    with MockAPI(script) as mock:
        env = checklib.kesi_subprocess_env(mock, TMPDIR=str(temp))
        proc = subprocess.run([sys.executable, str(KESI), "-p", "run it", "--permission-mode",
                               "bypassPermissions"], cwd=work, env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert "sandboxed" in mock.requests[-1]["body"]["messages"][-1]["content"][0]["content"]
    assert not [p.name for p in temp.iterdir() if p.name.startswith("kesi-sandbox-")]
