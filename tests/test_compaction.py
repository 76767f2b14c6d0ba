"""Compaction under the real API's rules: it streams (the SDK refuses a large
non-streaming max_tokens), never raises (Ctrl-C included), reads the
conversation from the prompt cache, and survives an endpoint that answers
with a tool call. Real SDK against the mock."""
import importlib.util
from pathlib import Path

import pytest

import kesi
from checklib import capture_ui
from mock_api import error, reply, tool_call

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("day17_check", ROOT / "examples" / "day17" / "check.py")
day17 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day17)

LONG = "The project keeps its tax rules in src/tax.py; every rule has a test. " * 300   # ~5k tokens


def is_compaction(body) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and kesi.COMPACT_PROMPT[:60] in kesi.text_of(last["content"])


def conversation(client):
    history = []
    kesi.run_turn(client, history, "Read this first: " + LONG)
    kesi.run_turn(client, history, "And now a short question.")
    return history


def test_compaction_works_with_a_large_max_tokens(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MAX_TOKENS", 64_000)     # the SDK refuses this without streaming
    mock, client = mock_client(["one", "two", "SUMMARY."])
    capture_ui()
    history = conversation(client)
    assert kesi.compact_history(client, history)
    assert "SUMMARY." in history[0]["content"] and mock.requests[-1]["body"]["stream"] is True


def test_compaction_reads_the_conversation_from_the_cache(ws, mock_client):
    mock, client = mock_client(["one", "two", "SUMMARY."])
    shown = capture_ui()
    history = conversation(client)
    assert kesi.handle_slash("/compact", client, history)
    normal, summary = mock.requests[1], mock.requests[2]
    assert is_compaction(summary["body"]) and "compacting the conversation" in shown.getvalue()
    assert summary["body"].get("tool_choice") == normal["body"].get("tool_choice")
    assert summary["body"]["tools"] == normal["body"]["tools"]
    usage = summary["usage"]
    total = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    assert usage["cache_read_input_tokens"] > 0.9 * total, usage


def test_a_tool_call_instead_of_a_summary_is_asked_again_without_tools(ws, mock_client):
    mock, client = mock_client(["one", "two", reply(None, tool_call("list_files", {})), "SUMMARY."])
    capture_ui()
    history = conversation(client)
    assert kesi.compact_history(client, history)
    assert "SUMMARY." in history[0]["content"]
    assert "tools" in mock.requests[2]["body"] and "tools" not in mock.requests[3]["body"]
    assert [c["label"] for c in kesi.METER.calls].count("compact") == 2


@pytest.mark.parametrize("failure", [
    error(400, "prompt is too long: 250000 tokens > 200000 maximum"),
    reply("Partial summ", fault="error-event"),
    reply("Partial summ", fault="no-stop"),
    reply("Partial summ", cut_after=4),
])
def test_every_failure_keeps_the_history(ws, mock_client, failure):
    mock, client = mock_client(["one", "two", failure], max_retries=0)
    shown = capture_ui()
    history = conversation(client)
    before = [dict(m) for m in history]
    assert not kesi.compact_history(client, history)
    assert history == before and "history kept" in shown.getvalue()


def test_ctrl_c_during_compact_returns_to_the_prompt(ws, mock_client):
    mock, client = mock_client(["one", "two", reply("SUMMARY.", delay=3.0)])
    shown = capture_ui()
    history = conversation(client)
    before = list(history)
    count = len(mock.requests)
    with day17.ctrl_c_raises():
        watcher = day17.ctrl_c_once_the_mock_has_the_request(_Later(mock, count))
        assert kesi.handle_slash("/compact", client, history) is True
        watcher.join()
    assert history == before and "compaction interrupted, history kept" in shown.getvalue()


class _Later:
    """The mock's request log, seen only from the (count+1)th request on."""

    def __init__(self, mock, count):
        self.mock, self.count = mock, count

    @property
    def requests(self):
        return self.mock.requests[self.count:]
