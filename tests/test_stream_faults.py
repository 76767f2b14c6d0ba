"""Streams that end wrong, as third-party servers and the real API's stop
reasons produce them. Real SDK, real SSE from the mock's fault modes: no
traceback, a journal the strict mock accepts, no tool run from an incomplete
reply, and a whole reply kept even when a usage field is missing."""
import pytest

import checklib
import kesi
from mock_api import reply, tool_call


def run(mock_client, script, history=None):
    mock, client = mock_client(script, max_retries=0)
    history = history if history is not None else [{"role": "user", "content": "go"}]
    ran = []
    original = kesi.TOOL_FUNCS["list_files"]
    kesi.TOOL_FUNCS["list_files"] = lambda path=".": ran.append(path) or ("a.txt", False)
    try:
        answer = kesi.run_agent(client, history)
    finally:
        kesi.TOOL_FUNCS["list_files"] = original
    return answer, history, mock, client, ran


def accepted_next(client, history):
    follow_up = history + [{"role": "user", "content": "and now?"}]
    return client.messages.create(**kesi.request_for(follow_up, kesi.MAIN_AGENT)).stop_reason


def test_a_stream_without_message_stop_is_broken_and_runs_no_tool(ws, mock_client):
    answer, history, mock, client, ran = run(
        mock_client, [reply("Let me check.", tool_call("list_files", {}), fault="no-stop")])
    assert ran == [] and not answer.ok and len(mock.requests) == 1
    assert "ended before" in answer.text
    kept = [b for m in history[1:] for b in kesi.as_blocks(m["content"])]
    assert kept[0] == {"type": "text", "text": "Let me check."}
    assert all(b["type"] == "text" for b in kept)
    assert accepted_next(client, history) == "end_turn"


@pytest.mark.parametrize("fault", ["null-content", "no-usage"])
def test_a_whole_reply_with_a_malformed_field_is_kept_and_its_tool_runs(ws, mock_client, fault):
    answer, history, mock, client, ran = run(
        mock_client, [reply("Let me check.", tool_call("list_files", {}), fault=fault), reply("Done.")])
    assert ran == ["."] and answer.ok and answer.text == "Done."
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"][1]["name"] == "list_files"
    assert accepted_next(client, history) == "end_turn"


def test_a_text_reply_without_usage_is_an_answer(ws, mock_client):
    answer, history, _, client, _ = run(mock_client, [reply("All fine.", fault="no-usage")])
    assert answer.ok and answer.text == "All fine."
    assert history[-1]["content"] == [{"type": "text", "text": "All fine."}]


def test_an_error_event_keeps_the_text_and_runs_nothing(ws, mock_client):
    answer, history, _, client, ran = run(
        mock_client, [reply("Let me check.", tool_call("list_files", {}), fault="error-event")])
    assert ran == [] and not answer.ok and "Overloaded" in answer.text
    assert accepted_next(client, history) == "end_turn"


def test_a_refusal_is_rolled_back_and_the_user_told(ws, mock_client):
    earlier = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi."},
               {"role": "user", "content": "do the bad thing"}]
    answer, history, mock, client, _ = run(
        mock_client, [reply(None, tool_call("list_files", {})),
                      reply("I can't help with that.", stop_reason="refusal")], history=earlier)
    assert not answer.ok and "removed" in answer.text
    assert history == earlier[:2]           # the refused prompt and everything after it are gone
    assert accepted_next(client, history) == "end_turn"


def test_pause_turn_without_a_server_tool_ends_the_turn_without_a_prefill(ws, mock_client):
    answer, history, mock, client, _ = run(
        mock_client, [reply("Working on it", stop_reason="pause_turn")] * 5)
    assert len(mock.requests) == 1
    assert answer.text == "Working on it" and history[-1]["role"] == "assistant"


def test_pause_turn_on_a_model_without_prefill_sends_no_prefill(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-opus-4-6")
    answer, history, mock, client, _ = run(mock_client, [reply("Half", stop_reason="pause_turn"), "Done."])
    assert all(r["status"] == 200 for r in mock.requests)


def test_an_sdk_error_before_the_stream_opens_is_a_message_not_a_traceback(ws, mock_client):
    history = [{"role": "user", "content": "go \udcff"}]     # a lone surrogate: the SDK cannot encode it
    answer, history, mock, client, _ = run(mock_client, ["never sent"], history=history)
    assert not answer.ok and answer.text.startswith("Error:")
    assert checklib is not None
