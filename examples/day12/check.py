# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 12 checks: loop limits, API errors and retries, Ctrl-C.

The real agent loop talks to the local mock API through the real SDK (with
its real retry logic); no key, no network. Run: uv run examples/day12/check.py
"""
import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import (Checks, workspace, mock_client, kesi_subprocess_env,   # noqa: E402
                      unique_sleep, started_commands, left_behind)
import anthropic                                                             # noqa: E402
import kesi                                                                  # noqa: E402
from mock_api import MockAPI, reply, tool_call                              # noqa: E402

checks = Checks("Day 12: loop limits, API errors, interruption")
KESI = Path(kesi.__file__).resolve()


def run(script, prompt="go", **options):
    """One run_agent call on a fresh history; returns (answer, history, mock)."""
    with mock_client(script, **options) as (mock, client):
        history = [{"role": "user", "content": prompt}]
        answer = kesi.run_agent(client, history)
    return answer, history, mock


@contextlib.contextmanager
def sdk_retry_waits():
    """The waits the SDK chose before its retries, as it logs them
    ("Retrying request to ... in 2.000000 seconds")."""
    waits, log = [], logging.getLogger("anthropic._base_client")

    class Recorder(logging.Handler):
        def emit(self, record):
            if str(record.msg).startswith("Retrying request"):
                waits.append(float(record.args[-1]))
    recorder, level = Recorder(logging.INFO), log.level
    log.addHandler(recorder)
    log.setLevel(logging.INFO)
    try:
        yield waits
    finally:
        log.removeHandler(recorder)
        log.setLevel(level)


def unanswered_tool_uses(history: list[dict]) -> list[str]:
    """tool_use ids with no tool_result in the next message (must be empty)."""
    missing = []
    for i, message in enumerate(history):
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        nxt = history[i + 1]["content"] if i + 1 < len(history) else []
        answered = {b["tool_use_id"] for b in nxt if isinstance(b, dict) and b.get("type") == "tool_result"}
        missing += [b["id"] for b in message["content"] if b["type"] == "tool_use" and b["id"] not in answered]
    return missing


def interrupt_me_after(seconds: float) -> threading.Timer:
    """Ctrl-C, as the terminal would send it: SIGINT to this process."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


with workspace({"a.txt": "a\n"}):
    kesi.UI = io.StringIO()          # the per-tool lines would drown the PASS lines

    # --- loop limits -----------------------------------------------------------
    answer, history, mock = run(MockAPI.mode("loop"))
    checks.check("1. an endless tool loop is stopped by MAX_TURNS (exactly 20 requests)",
                 len(mock.requests) == 20 and "20 model round trips" in answer.text and not answer.ok, len(mock.requests))
    checks.check("2. the history ends with the assistant's notice: 42 entries (1 + 20x2 + 1)",
                 len(history) == 42 and history[-1] == {"role": "assistant", "content": answer.text}
                 and not unanswered_tool_uses(history), len(history))
    answer, history, mock = run(MockAPI.mode("fail"))
    checks.check("3. three rounds of failing tools stop early (3 requests)",
                 len(mock.requests) == 3 and f"{kesi.MAX_TOOL_FAILURES} rounds in a row" in answer.text, answer.text)

    def mixed(body, n):
        """Rounds 1-2 fail, round 3 half succeeds, 4-6 fail: the count restarts."""
        bad = tool_call("read_file", {"file_path": "missing.txt"})
        if n == 3:
            return reply(None, bad, tool_call("read_file", {"file_path": "a.txt"}))
        return reply(None, bad)
    answer, history, mock = run(mixed)
    checks.check("a partly successful round resets the failure count (stops after round 6)",
                 len(mock.requests) == 6 and "round 6" in answer.text, answer.text)

    # --- API errors and the SDK's retries ----------------------------------------
    answer, history, mock = run(MockAPI.mode("429"))
    checks.check("4. 429 is retried by the SDK: 3 requests with the default 2 retries",
                 len(mock.requests) == 3 and [r["retry_count"] for r in mock.requests] == [0, 1, 2])
    checks.check("5. exhausted retries give a message, not a traceback",
                 answer.text.startswith("Error: still rate limited") and not answer.ok, answer.text)
    checks.check("6. a failed API call leaves no half message in the history",
                 history == [{"role": "user", "content": "go"}], history)
    with sdk_retry_waits() as waits:
        answer, history, mock = run(MockAPI.mode("429-after", retry_after=2), max_retries=1)
    # The SDK's own backoff would be under a second: a wait of 2 s is the header honoured.
    checks.check("7. retry-after: 2 is honoured (max_retries=1: the SDK waits 2 s, then retries once)",
                 waits == [2.0] and len(mock.requests) == 2, waits)
    answer, history, mock = run(MockAPI.mode("529"), max_retries=1)
    checks.check("8. 529 is retried and then explained",
                 len(mock.requests) == 2 and answer.text.startswith("Error: the API is overloaded (529)"), answer.text)
    answer, history, mock = run(MockAPI.mode("400"))
    checks.check("9. 400 is not retried; the message points to /reset",
                 len(mock.requests) == 1 and "rejected (400)" in answer.text and "/reset" in answer.text, answer.text)
    answer, history, mock = run(MockAPI.mode("400-retry"))
    checks.check("10. a 400 with x-should-retry: true is retried", len(mock.requests) == 2 and answer.ok)
    answer, history, mock = run(MockAPI.mode("500-then-ok"))
    checks.check("11. 500 twice, then success: the user never notices",
                 len(mock.requests) == 3 and answer.ok and "all good" in answer.text, answer.text)
    dead = anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="test-key", max_retries=0)
    history = [{"role": "user", "content": "go"}]
    answer = kesi.run_agent(dead, history)
    checks.check("an unreachable API gives a readable message and a clean history",
                 answer.text.startswith("Error: could not reach the API") and len(history) == 1, answer.text)

    # --- cut-off and unusual stop reasons -------------------------------------------
    answer, history, mock = run([reply("half", tool_call("list_files", {}), stop_reason="max_tokens")] * 2)
    checks.check("12. max_tokens is reported as the output limit, no tool ran",
                 "max_tokens" in answer.text and not unanswered_tool_uses(history) and len(history) == 2, answer.text)
    answer, history, mock = run([reply("half", stop_reason="model_context_window_exceeded")])
    checks.check("13. model_context_window_exceeded is reported as a full context window",
                 "context window" in answer.text and not answer.ok, answer.text)
    answer, history, mock = run([reply("Working on it...", stop_reason="pause_turn"), reply("Finished.")])
    checks.check("pause_turn with nothing to run ends the turn (it resumes only after a server tool)",
                 len(mock.requests) == 1 and answer.text == "Working on it..." and answer.ok, answer.text)
    answer, history, mock = run([reply("I can't help with that.", stop_reason="refusal")])
    checks.check("refusal: the refused prompt is rolled back and the user is told",
                 "removed from the conversation" in answer.text and not answer.ok and history == [], answer.text)

    # --- interruption -------------------------------------------------------------
    real_list_files = kesi.TOOL_FUNCS["list_files"]

    def interrupted_list_files(path="."):
        raise KeyboardInterrupt
    kesi.TOOL_FUNCS["list_files"] = interrupted_list_files
    try:
        script = [reply(None, tool_call("list_files", {}), tool_call("read_file", {"file_path": "a.txt"})),
                  reply("Back again.")]
        with mock_client(script) as (mock, client):
            history = [{"role": "user", "content": "look"}]
            answer = kesi.run_agent(client, history)
            results = history[2]["content"]
            history.append({"role": "user", "content": "go on"})
            again = kesi.run_agent(client, history)
    finally:
        kesi.TOOL_FUNCS["list_files"] = real_list_files
    checks.check("14. a tool interrupted by Ctrl-C: every tool_use still gets a result",
                 "interrupted" in answer.text and not unanswered_tool_uses(history)
                 and results[0]["content"] == kesi.INTERRUPTED_TOOL and results[1]["content"] == kesi.SKIPPED_TOOL,
                 results)
    checks.check("…and the next request is accepted by the (strict) API", again.ok and again.text == "Back again.")

    dangling = [{"role": "user", "content": "run it"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_x", "name": "run_command",
                                                   "input": {"command": "make"}}]}]
    sealed = kesi.seal_dangling_tool_use(dangling)
    result = dangling[-1]["content"][0] if sealed else {}
    checks.check("15. a dangling tool_use is sealed with 'state unknown'",
                 sealed and result.get("tool_use_id") == "toolu_x" and "unknown" in result.get("content", "")
                 and result.get("is_error") is True, dangling[-1])
    clean = [{"role": "user", "content": "hi"}]
    checks.check("16. nothing dangling, nothing added", kesi.seal_dangling_tool_use(clean) is False and len(clean) == 1)

    real_run_tools = kesi.run_tools

    def ctrl_c_before_results(uses, agent):
        raise KeyboardInterrupt          # after the tool_use was recorded, before any result
    kesi.run_tools = ctrl_c_before_results
    try:
        with mock_client([reply(None, tool_call("list_files", {})), reply("Fine.")]) as (mock, client):
            history: list[dict] = []
            kesi.UI = io.StringIO()
            answer = kesi.run_turn(client, history, "look")
            notice = kesi.UI.getvalue()
            kesi.run_tools = real_run_tools
            again = kesi.run_turn(client, history, "go on")
    finally:
        kesi.run_tools = real_run_tools
        kesi.UI = io.StringIO()
    checks.check("Ctrl-C between the tool_use and its result: sealed, notice printed, back to the prompt",
                 not answer.ok and "interrupted" in notice and "unknown" in history[2]["content"][0]["content"]
                 and again.ok, notice)

    # The first reply is held back until the turn has returned: a turn that
    # waited for it would get it (from the guard, 60 s later) into its history.
    released = threading.Event()

    def held_back(body, n):
        if n == 1:
            released.wait(60)
            return reply("too late")
        return reply("Here now.")
    with mock_client(held_back) as (mock, client):
        history = []
        timer = interrupt_me_after(0.3)
        try:
            answer = kesi.run_turn(client, history, "slow question")
        finally:
            timer.cancel()
        again = kesi.run_turn(client, history, "again")
        released.set()
    checks.check("Ctrl-C while waiting for the API returns at once with a valid history",
                 not answer.ok and "too late" not in str(history) and again.ok
                 and again.text == "Here now.", history)

    # --- Ctrl-C inside run_command, with the sandbox off and on ---------------------
    real_sandbox_kind = kesi.sandbox_kind
    available = kesi.sandbox_kind()
    for tag, kind in [("sandbox off", None)] + ([(available, available)] if available else []):
        kesi.sandbox_kind = lambda kind=kind: kind
        timer, interrupted, sleep = interrupt_me_after(0.2), False, unique_sleep()
        try:
            with started_commands() as procs:
                kesi.run_command(f"{sleep} & {sleep}")
        except KeyboardInterrupt:
            interrupted = True
        finally:
            timer.cancel()
        checks.check(f"17. [{tag}] SIGINT during `sleep 30`: the interrupt propagates, the group is stopped",
                     interrupted and len(procs) == 1 and procs[0].poll() is not None
                     and not left_behind(procs, [sleep]))
    kesi.sandbox_kind = real_sandbox_kind

# --- the command line: an API failure exits 1 with the message on stderr ----------------
with workspace() as root, MockAPI(MockAPI.mode("400")) as mock:
    proc = subprocess.run([sys.executable, str(KESI), "-p", "hello"], cwd=root, capture_output=True, text=True,
                          env=kesi_subprocess_env(mock), stdin=subprocess.DEVNULL, timeout=60)
    checks.check("headless: a rejected request exits 1 with the explanation, no traceback",
                 proc.returncode == 1 and "rejected (400)" in proc.stderr and proc.stdout == ""
                 and "Traceback" not in proc.stderr,
                 (proc.returncode, proc.stdout[-300:], proc.stderr[-300:]))

sys.exit(checks.finish())
