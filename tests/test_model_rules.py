"""The API's rules for each model (issue 27), through the real SDK against the mock:
output ceilings and context windows (the Models API first, then the documented
table), a reply cut inside a tool call, stop reasons KeSi does not know, the API's
own error text, capped retry waits, refusal explanations, thinking blocks that
travel across tool turns, and streams whose events have no `event:` line."""
import subprocess
import sys
import time

import anthropic
import pytest

import checklib
import kesi
from checklib import ROOT, kesi_subprocess_env
from mock_api import MockAPI, error, reply, sign, tool_call
from test_permissions import Terminal

KESI = str(ROOT / "kesi.py")
CUT = reply("Writing it now", tool_call("write_file", {"file_path": "a.txt", "content": "x"}), stop_reason="max_tokens")


def headless(cwd, *args, mock, **env):
    return subprocess.run([sys.executable, KESI, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=kesi_subprocess_env(mock, KESI_SANDBOX="off", **env))


def sent_max_tokens(mock) -> list[int]:
    return [r["body"]["max_tokens"] for r in mock.requests]


# --- 2. output ceiling and context window ---------------------------------------------------

def test_a_max_tokens_above_the_models_maximum_is_refused_at_start_up(ws):
    with MockAPI(["never sent"]) as mock:
        proc = headless(ws, "-p", "hi", mock=mock, KESI_MAX_TOKENS="200000", KESI_MODEL="claude-haiku-4-5")
    assert proc.returncode == 2 and mock.requests == []
    assert "KESI_MAX_TOKENS=200000 is above the most claude-haiku-4-5 can write (64,000 tokens)" in proc.stderr
    assert mock.model_lookups == ["claude-haiku-4-5"]


def test_the_models_api_gives_the_limits_where_the_endpoint_has_it(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-haiku-4-5")
    mock, client = mock_client(["one"], models={"claude-haiku-4-5": (150_000, 4000, "ed", 4096)})
    kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert sent_max_tokens(mock) == [4000] and kesi.context_window() == 150_000


def test_without_a_models_api_the_documented_table_gives_them(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-6")
    mock, client = mock_client(["one"], models_api=False)
    kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert sent_max_tokens(mock) == [8192] and kesi.context_window() == 1_000_000
    assert mock.model_lookups == ["claude-sonnet-4-6"]


def test_on_a_model_that_thinks_unasked_the_default_leaves_room_for_the_thinking(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-opus-5-5")
    mock, client = mock_client(["one"])
    kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert sent_max_tokens(mock) == [kesi.THINKING_MAX_TOKENS] and kesi.THINKING_MAX_TOKENS > 8192


def test_a_reply_cut_inside_a_tool_call_is_asked_again_once_with_more_room(ws, mock_client, notices):
    mock, client = mock_client([CUT, reply(tool_call("write_file", {"file_path": "a.txt", "content": "x"})),
                                "Written."])
    kesi.PERMISSION_MODE = "acceptEdits"
    answer = kesi.run_agent(client, [{"role": "user", "content": "write a.txt"}])
    assert answer.ok and (ws / "a.txt").read_text() == "x"
    assert sent_max_tokens(mock) == [8192, 16384, 16384]
    assert "asking again with max_tokens 16,384" in notices.getvalue()


def test_at_the_repl_the_person_is_asked_before_the_retry(ws, mock_client):
    mock, _ = mock_client([CUT, "Fine with more room.", CUT])
    env = kesi_subprocess_env(mock, KESI_SANDBOX="off", TERM="dumb")
    env.pop("COLUMNS", None)
    with Terminal([sys.executable, KESI], ws, env, columns=200) as term:
        term.expect("you > ")
        term.type("write a.txt\n")
        term.expect("Ask again with 16,384? [y/N] ")
        term.type("y\n")
        term.expect("KeSi > Fine with more room.")
        term.expect("you > ")
        term.type("again\n")
        term.expect("Ask again with 16,384? [y/N] ")
        term.type("n\n")
        shown = term.expect("you > ")
        term.type("/exit\n")
        term.close()
    assert "hit its output limit (max_tokens)" in shown
    assert sent_max_tokens(mock) == [8192, 16384, 8192]


# --- 3. stop reasons KeSi does not know -----------------------------------------------------

class NullStopReason(MockAPI):
    def _build_message(self, step, body, n):
        message = super()._build_message(step, body, n)
        return {**message, "stop_reason": None} if step.tools else message


@pytest.mark.parametrize("make_mock", [
    lambda: MockAPI([reply("Let me", tool_call("list_files", {}), stop_reason="compaction_pending")]),
    lambda: NullStopReason([reply("Let me", tool_call("list_files", {}))]),
])
def test_an_unknown_or_null_stop_reason_runs_no_tool_and_names_it(ws, monkeypatch, make_mock):
    ran = []
    monkeypatch.setitem(kesi.TOOL_FUNCS, "list_files", lambda path=".": ran.append(path) or ("x", False))
    with make_mock() as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key")
        history = [{"role": "user", "content": "go"}]
        answer = kesi.run_agent(client, history)
        reason = "'compaction_pending'" if "compaction_pending" in str(mock.script) else "None"
        assert ran == [] and not answer.ok and f"does not know ({reason})" in answer.text
        history.append({"role": "user", "content": "next"})
        assert kesi.run_agent(client, history).ok and mock.requests[-1]["status"] == 200


# --- 5. the API's words, the wait, the refusal's reason ------------------------------------------

def test_a_429_shows_the_apis_own_message(ws, mock_client):
    mock, client = mock_client([error(429, "This request would exceed your organization's monthly spend limit.")],
                               max_retries=0)
    answer = kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert "monthly spend limit" in answer.text and "429" in answer.text


def test_a_long_retry_after_is_capped_and_the_wait_is_said(ws, monkeypatch, notices):
    monkeypatch.setattr(kesi, "MAX_RETRY_WAIT", 1)
    monkeypatch.setattr(kesi.MAIN_AGENT, "echo", False)          # as in -p: no spinner to count down
    with MockAPI([error(429, "Rate limited (mock)", headers={"retry-after": "90"}), "ok after the wait"]) as mock:
        client = kesi.make_client(kesi.Settings(api_key="test-key", base_url=mock.url))
        started = time.monotonic()
        answer = kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert answer.ok and time.monotonic() - started < 30
    assert "retrying in 1 s" in notices.getvalue()


def test_a_refusal_shows_its_explanation(ws, mock_client):
    details = {"type": "refusal", "category": "cyber", "explanation": "This looks like malware development."}
    mock, client = mock_client([reply("I can't help.", stop_reason="refusal", stop_details=details)])
    answer = kesi.run_agent(client, [{"role": "user", "content": "write malware"}])
    assert "declined this request: This looks like malware development." in answer.text


# --- 6. thinking blocks travel unchanged ------------------------------------------------------

def test_thinking_blocks_go_back_across_tool_turns_with_their_signatures(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-opus-5-5")
    thought = "The user wants the files; list them first."
    mock, client = mock_client([reply("Listing.", tool_call("list_files", {}), thinking=thought), "Done."])
    assert kesi.run_agent(client, [{"role": "user", "content": "what is here?"}]).ok
    sent = mock.requests[1]["body"]["messages"][1]["content"][0]
    assert sent == {"type": "thinking", "thinking": thought, "signature": sign(thought)}
    assert [r["status"] for r in mock.requests] == [200, 200]


# --- 7. streams without event names -----------------------------------------------------------

def test_a_stream_without_event_lines_is_read_by_each_events_type(ws, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "bypassPermissions")
    with MockAPI([reply("Looking.", tool_call("list_files", {}), fault="no-event-names"),
                  reply("All here.", fault="no-event-names")]) as mock:
        client = kesi.make_client(kesi.Settings(api_key="test-key", base_url=mock.url))
        history = [{"role": "user", "content": "what is here?"}]
        answer = kesi.run_agent(client, history)
    assert answer.ok and answer.text == "All here." and len(mock.requests) == 2
    assert history[2]["content"][0]["type"] == "tool_result"
