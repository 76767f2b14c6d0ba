"""The agent loop's limits and failure paths, end to end through the real SDK.

Every model turn is a real HTTP request to the strict mock API, so a history
the real API would reject (an unanswered tool_use, bad alternation, empty
text) fails these tests too: "the next request is accepted" is checked
wherever a failure could have left the journal broken.
"""
import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import anthropic
import pytest
from anthropic.types import TextBlock, ToolUseBlock

import kesi
from checklib import kesi_subprocess_env, left_behind, live_processes, unique_sleep
from mock_api import MockAPI, error, reply, tool_call

KESI = Path(kesi.__file__).resolve()


@pytest.fixture(autouse=True)
def quiet(ws, monkeypatch):
    """Tool lines and notices go to a buffer the test can read."""
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    return ws


def run(mock_client, script, prompt="go", **options):
    mock, client = mock_client(script, **options)
    history = [{"role": "user", "content": prompt}]
    return kesi.run_agent(client, history), history, mock, client


def unanswered(history):
    """tool_use ids not answered in the very next message."""
    missing = []
    for i, message in enumerate(history):
        if message["role"] == "assistant" and isinstance(message["content"], list):
            following = history[i + 1]["content"] if i + 1 < len(history) else []
            answered = {b.get("tool_use_id") for b in following if isinstance(b, dict)}
            missing += [b["id"] for b in message["content"] if b["type"] == "tool_use" and b["id"] not in answered]
    return missing


def accepts_next_turn(client, history, mock) -> bool:
    """Send one more user turn: the strict mock must accept the journal."""
    history.append({"role": "user", "content": "next"})
    answer = kesi.run_agent(client, history)
    return mock.requests[-1]["status"] == 200 and answer.ok


# --- loop limits -------------------------------------------------------------------------

def test_the_limits_have_their_documented_values():
    assert kesi.MAX_TURNS == kesi.Settings().max_turns == 20
    assert kesi.MAX_TOOL_FAILURES == 3


def test_max_turns_stops_an_endless_loop_with_a_valid_journal(mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MAX_TURNS", 4)
    answer, history, mock, client = run(mock_client, MockAPI.mode("loop"))
    assert len(mock.requests) == 4 and not answer.ok
    assert "4 model round trips" in answer.text and "/reset" in answer.text
    assert len(history) == 1 + 4 * 2 + 1 and history[-1] == {"role": "assistant", "content": answer.text}
    assert unanswered(history) == []


def test_three_all_failed_rounds_stop_the_loop(mock_client):
    answer, history, mock, _ = run(mock_client, MockAPI.mode("fail"))
    assert len(mock.requests) == 3 and "3 rounds in a row" in answer.text and "round 3" in answer.text


def test_unknown_tools_and_refused_permissions_count_as_failures(mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    script = [reply(None, tool_call("no_such_tool", {})),
              reply(None, tool_call("write_file", {"file_path": "x.txt", "content": "x"})),
              reply(None, tool_call("run_command", {"command": "python -c 1"}))]
    answer, history, mock, _ = run(mock_client, script)
    assert len(mock.requests) == 3 and "3 rounds in a row" in answer.text
    assert not (kesi.BASE_DIR / "x.txt").exists()


# --- stop reasons ------------------------------------------------------------------------------

@pytest.mark.parametrize("reason, words", [("max_tokens", "max_tokens"),
                                           ("model_context_window_exceeded", "context window")])
def test_a_cut_off_reply_runs_no_tool_and_records_only_a_notice(mock_client, monkeypatch, reason, words):
    ran = []
    monkeypatch.setitem(kesi.TOOL_FUNCS, "list_files", lambda path=".": ran.append(path) or ("x", False))
    cut = reply("partial", tool_call("list_files", {}), stop_reason=reason)
    script = [cut, cut] if reason == "max_tokens" else [cut]       # max_tokens: asked again once, cut again
    answer, history, mock, client = run(mock_client, script)
    assert ran == [] and not answer.ok and words in answer.text
    assert history[1:] == [{"role": "assistant", "content": answer.text}]
    assert accepts_next_turn(client, history, mock)


def test_pause_turn_without_tools_ends_the_turn(mock_client):
    """pause_turn is resumed only after a server tool, and KeSi has none: sending the
    paused reply back would be a prefill (refused by 4.6+ models) and could loop."""
    answer, history, mock, _ = run(mock_client, [reply("thinking...", stop_reason="pause_turn"), reply("Done.")])
    assert answer.text == "thinking..." and len(mock.requests) == 1
    assert history[-1] == {"role": "assistant", "content": [{"type": "text", "text": "thinking..."}]}


def test_pause_turn_with_tool_calls_runs_them(mock_client):
    script = [reply(None, tool_call("list_files", {}), stop_reason="pause_turn"), reply("Listed.")]
    answer, history, mock, _ = run(mock_client, script)
    assert answer.text == "Listed." and history[2]["content"][0]["type"] == "tool_result"


def test_refusal_rolls_the_exchange_back_and_says_so(mock_client):
    """The API wants a reset or a rephrase after a refusal: the refused prompt goes."""
    answer, history, mock, client = run(mock_client, [reply("I won't do that.", stop_reason="refusal")])
    assert not answer.ok and "removed from the conversation" in answer.text
    assert history == []
    assert accepts_next_turn(client, history, mock)


def test_whitespace_text_beside_a_tool_call_is_dropped(mock_client):
    answer, history, mock, _ = run(mock_client, [reply("   ", tool_call("list_files", {})), reply("ok")])
    assert answer.ok and mock.requests[1]["status"] == 200
    assert [b["type"] for b in history[1]["content"]] == ["tool_use"]


# --- API errors and retries -------------------------------------------------------------------------

@pytest.mark.parametrize("step, retries, requests, words", [
    (error(401, "invalid x-api-key"), 2, 1, "API key was rejected (401)"),
    (error(404, "model: nope"), 2, 1, "API answered 404"),
    (error(400, "prompt is too long: 250000 tokens > 200000 maximum"), 2, 1, "prompt is too long"),
    (error(429, "slow down", headers={"retry-after": "0"}), 1, 2, "still rate limited (429)"),
    (error(529, "Overloaded"), 0, 1, "overloaded (529)"),
    (error(500, "Internal server error"), 0, 1, "API answered 500"),
])
def test_api_errors_read_well_and_leave_only_the_prompt(mock_client, step, retries, requests, words):
    answer, history, mock, _ = run(mock_client, lambda body, n: step, max_retries=retries)
    assert len(mock.requests) == requests
    assert answer.text.startswith("Error:") and words in answer.text and not answer.ok
    assert history == [{"role": "user", "content": "go"}]


def test_the_sdk_retries_5xx_with_growing_retry_counts(mock_client):
    failure = error(500, "Internal server error", headers={"retry-after-ms": "1"})    # not the SDK's backoff of ~1.5 s
    answer, _, mock, _ = run(mock_client, [failure, failure, reply("ok")])
    assert answer.ok and [r["retry_count"] for r in mock.requests] == [0, 1, 2]


def test_retry_after_is_honoured(mock_client):
    script = [error(429, "slow down", headers={"retry-after": "1"}), reply("ok")]
    answer, _, mock, _ = run(mock_client, script, max_retries=1)
    assert answer.ok and mock.requests[1]["time"] - mock.requests[0]["time"] >= 0.9


def test_a_400_is_retried_only_when_the_server_says_so(mock_client):
    _, _, mock, _ = run(mock_client, MockAPI.mode("400-retry"))
    assert len(mock.requests) == 2
    _, _, mock, _ = run(mock_client, [error(400, "bad"), reply("never")])
    assert len(mock.requests) == 1


def test_a_slow_api_times_out_with_a_clear_message():
    with MockAPI([reply("late", delay=30)]) as mock:      # far beyond the 0.5 s timeout
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0, timeout=0.5)
        history = [{"role": "user", "content": "go"}]
        answer = kesi.run_agent(client, history)
    assert answer.text == "Error: timed out waiting for the model." and len(history) == 1


def test_a_stream_cut_mid_reply_keeps_the_journal_valid(mock_client):
    script = [reply("This reply will be cut off in the middle", tool_call("list_files", {}), cut_after=4),
              reply("fine")]
    answer, history, mock, client = run(mock_client, script)
    assert not answer.ok and answer.text.startswith("Error:")
    assert unanswered(history) == []
    assert accepts_next_turn(client, history, mock)


# --- interruption ----------------------------------------------------------------------------------

def test_ctrl_c_in_a_tool_answers_every_tool_use_and_runs_nothing_after(mock_client, monkeypatch):
    ran = []

    def interrupted(path="."):
        raise KeyboardInterrupt
    monkeypatch.setitem(kesi.TOOL_FUNCS, "list_files", interrupted)
    monkeypatch.setitem(kesi.TOOL_FUNCS, "glob", lambda pattern: ran.append(pattern) or ("x", False))
    script = [reply(None, tool_call("list_files", {}), tool_call("glob", {"pattern": "*"}),
                    tool_call("glob", {"pattern": "**"})), reply("back")]
    answer, history, mock, client = run(mock_client, script)
    results = history[2]["content"]
    assert ran == [] and "interrupted" in answer.text and not answer.ok
    assert [r["content"] for r in results] == [kesi.INTERRUPTED_TOOL, kesi.SKIPPED_TOOL, kesi.SKIPPED_TOOL]
    assert all(r["is_error"] for r in results)
    assert accepts_next_turn(client, history, mock)


def test_seal_dangling_tool_use_answers_sdk_blocks_and_dicts():
    history = [{"role": "user", "content": "x"},
               {"role": "assistant", "content": [TextBlock(type="text", text="running"),
                                                 ToolUseBlock(type="tool_use", id="toolu_a", name="run_command",
                                                              input={"command": "make"}),
                                                 {"type": "tool_use", "id": "toolu_b", "name": "read_file",
                                                  "input": {"file_path": "a"}}]}]
    assert kesi.seal_dangling_tool_use(history) is True
    results = history[-1]["content"]
    assert [r["tool_use_id"] for r in results] == ["toolu_a", "toolu_b"]
    assert all(r["is_error"] and r["content"] == kesi.STATE_UNKNOWN for r in results)
    assert kesi.seal_dangling_tool_use(history) is False            # nothing left to seal


@pytest.mark.parametrize("history", [
    [],
    [{"role": "user", "content": "hi"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "a plain answer"}],
    [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [{"type": "text", "text": "hello"}]}],
])
def test_seal_dangling_tool_use_leaves_complete_journals_alone(history):
    before = [dict(m) for m in history]
    assert kesi.seal_dangling_tool_use(history) is False and history == before


def test_ctrl_c_between_tool_use_and_results_is_sealed_by_run_turn(mock_client, monkeypatch):
    mock, client = mock_client([reply(None, tool_call("run_command", {"command": "make"})), reply("ok")])

    def interrupted(uses, agent):
        raise KeyboardInterrupt
    monkeypatch.setattr(kesi, "run_tools", interrupted)
    history = []
    answer = kesi.run_turn(client, history, "build it")
    assert not answer.ok and "interrupted" in kesi.UI.getvalue()
    assert history[-1]["content"][0]["content"] == kesi.STATE_UNKNOWN
    assert kesi.read_session(kesi.SESSION_FILE)[0] == history      # what was saved is loadable as is
    monkeypatch.undo()
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    assert kesi.run_turn(client, history, "again").ok


def test_ctrl_c_in_the_repl_stops_the_command_and_keeps_the_session_going(ws):
    # The sandbox is left on "auto" (bubblewrap where it works); both ways of
    # launching are covered at the tool level in test_run_command.py.
    marker = unique_sleep()       # KeSi runs as a child here: its command is found by this marker
    script = [reply(None, tool_call("run_command", {"command": f"{marker} & {marker}"})), reply("Second answer.")]
    with MockAPI(script) as mock:
        proc = subprocess.Popen([sys.executable, str(KESI), "--permission-mode", "bypassPermissions"], cwd=ws,
                                env=kesi_subprocess_env(mock, KESI_SANDBOX="auto"), text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            proc.stdin.write("start the job\n")
            proc.stdin.flush()
            deadline = time.monotonic() + 30
            while not live_processes(markers=[marker]) and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert live_processes(markers=[marker]), "the command never started"
            proc.send_signal(signal.SIGINT)      # the terminal's Ctrl-C reaches KeSi, not the command's session
            out, err = proc.communicate("what now?\n/exit\n", timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, err
    assert "interrupted" in out and "Second answer." in out and "Traceback" not in err
    assert not left_behind(markers=[marker])
    assert len(mock.requests) == 2 and mock.requests[1]["status"] == 200
    result = mock.requests[1]["body"]["messages"][2]["content"][0]
    assert result["content"] == kesi.INTERRUPTED_TOOL and result["is_error"] is True


def test_headless_run_hitting_max_turns_exits_1(ws):
    with MockAPI(MockAPI.mode("loop")) as mock:
        proc = subprocess.run([sys.executable, str(KESI), "-p", "loop forever"], cwd=ws, capture_output=True,
                              text=True, env=kesi_subprocess_env(mock, KESI_MAX_TURNS="2"), timeout=60,
                              stdin=subprocess.DEVNULL)
    assert proc.returncode == 1 and "2 model round trips" in proc.stderr and proc.stdout == ""
    assert len(mock.requests) == 2
