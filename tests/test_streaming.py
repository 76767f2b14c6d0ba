"""Streaming: text as it arrives, and a valid journal whatever breaks the stream.

Real SDK, real SSE from the mock. Ctrl-C is a real SIGINT raised at a chosen
SDK event (helpers from examples/day17/check.py); connection resets are real
TCP resets (the mock's cut_after)."""
import importlib.util
import io
import json
from pathlib import Path

import anthropic

import checklib
import kesi
from mock_api import MockAPI, error, reply, stream_events, tool_call

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("day17_check", ROOT / "examples" / "day17" / "check.py")
day17 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day17)
CtrlC, Screen, ErrorMidStream = day17.CtrlC, day17.Screen, day17.ErrorMidStream
dangling_tool_uses, accepted_by_mock = day17.dangling_tool_uses, day17.accepted_by_mock

PLAN = "I'll create hello.py now."
HELLO = {"file_path": "hello.py", "content": "print('hello')\n"}
FULL_CONTENT = [{"type": "text", "text": PLAN}, {"type": "tool_use", "name": "write_file", "input": HELLO}]


def sdk_event_names(mock_client) -> list[str]:
    """The SDK events of PLAN + write_file, as KeSi sees them (a clean run)."""
    mock, client = mock_client([reply(PLAN, tool_call("write_file", HELLO))])
    plan = CtrlC()
    request = kesi.request_for([{"role": "user", "content": "go"}], kesi.MAIN_AGENT)
    with kesi.open_stream(plan.attach(client), request) as stream:
        for _ in stream:
            pass
    return plan.timeline


def sse_event_count() -> int:
    """How many SSE events the mock sends for PLAN + write_file."""
    content = [FULL_CONTENT[0], {**FULL_CONTENT[1], "id": "toolu_count"}]
    return len(stream_events({"content": content, "usage": {"output_tokens": 1}, "stop_reason": "tool_use"}))


def assistant_blocks(history):
    return [b for m in history if m["role"] == "assistant" and isinstance(m["content"], list)
            for b in m["content"]]


def assert_only_complete_blocks(history, where):
    """Whatever was kept is a complete block of the real reply, in order."""
    kept = assistant_blocks(history)
    assert len(kept) <= len(FULL_CONTENT), where
    for block, full in zip(kept, FULL_CONTENT):
        assert block["type"] == full["type"], where
        assert block.get("text") == full.get("text") and block.get("input") == full.get("input"), where


# --- streaming itself ------------------------------------------------------------

def test_text_arrives_in_pieces_and_is_printed_before_the_stream_ends(ws, mock_client):
    mock, client = mock_client([reply("Streaming shows the answer while it is being written.")])
    plan = CtrlC()
    kesi.UI = Screen(plan.timeline)
    answer = kesi.run_agent(plan.attach(client), [{"role": "user", "content": "hi"}])
    pieces = [w for w in kesi.UI.writes if w not in ("KeSi > ", "\n")]
    assert len(pieces) >= 2 and "".join(pieces) == answer.text
    assert kesi.UI.text() == f"KeSi > {answer.text}\n"
    assert plan.timeline.index(("screen", pieces[0])) < plan.timeline.index("message_stop")
    assert mock.requests[0]["body"]["stream"] is True


def test_streamed_journal_matches_the_complete_message(ws, mock_client):
    (ws / "notes.txt").write_text("remember the milk\n")
    mock, client = mock_client([reply("Reading it.", tool_call("read_file", {"file_path": "notes.txt"})),
                                reply("It says: remember the milk.")])
    history = [{"role": "user", "content": "what is in notes.txt?"}]
    answer = kesi.run_agent(client, history)
    assert answer.ok and answer.text == "It says: remember the milk."
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[1]["content"][1] == {"type": "tool_use", "id": history[1]["content"][1]["id"],
                                        "name": "read_file", "input": {"file_path": "notes.txt"}}
    assert "remember the milk" in history[2]["content"][0]["content"]
    assert [r["status"] for r in mock.requests] == [200, 200]
    assert [c["partial"] for c in kesi.METER.calls] == [False, False]


def test_headless_agent_streams_nothing_to_the_screen(ws, mock_client):
    mock, client = mock_client([reply("Only the return value carries this.")])
    kesi.UI = Screen()
    kesi.MAIN_AGENT.echo = False
    answer = kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert answer.text == "Only the return value carries this." and kesi.UI.writes == []


def test_unknown_and_ping_events_are_ignored(ws):
    class FutureEvents(MockAPI):
        def _send_stream(self, h, events, cut_after, headers):
            extra = [("ping", {"type": "ping"}), ("future_event", {"type": "future_event", "x": 1})]
            super()._send_stream(h, events[:3] + extra + events[3:], cut_after, headers)

    with FutureEvents([reply("Still fine.")]) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0)
        history = [{"role": "user", "content": "hi"}]
        assert kesi.run_agent(client, history).text == "Still fine."
        assert history[-1]["content"] == [{"type": "text", "text": "Still fine."}]


def test_an_error_before_the_stream_opens_appends_nothing(ws, mock_client):
    mock, client = mock_client([error(400, "prompt is too long: 250000 tokens > 200000 maximum")])
    history = [{"role": "user", "content": "hi"}]
    answer = kesi.run_agent(client, history)
    assert not answer.ok and "rejected (400)" in answer.text
    assert history == [{"role": "user", "content": "hi"}] and not kesi.METER.calls


def test_overload_before_the_stream_opens_is_retried_by_the_sdk(ws, mock_client):
    mock, client = mock_client([error(529, "Overloaded", headers={"retry-after-ms": "1"}), reply("Back again.")])
    assert kesi.run_agent(client, [{"role": "user", "content": "hi"}]).text == "Back again."
    assert [r["status"] for r in mock.requests] == [529, 200]


def test_an_error_event_mid_stream_keeps_the_finished_text(ws):
    with ErrorMidStream([reply(PLAN, tool_call("write_file", HELLO))]) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0)
        history = [{"role": "user", "content": "make hello.py"}]
        answer = kesi.run_agent(client, history)
        assert not answer.ok and "broke off" in answer.text and "Overloaded" in answer.text
        assert history[1]["content"] == [{"type": "text", "text": PLAN}, {"type": "text", "text": answer.text}]
        assert not (ws / "hello.py").exists()
        assert [c["partial"] for c in kesi.METER.calls] == [True]
        assert accepted_by_mock(client, history) == "end_turn"


# --- Ctrl-C at every point of the stream -------------------------------------------

def test_the_reply_used_below_has_text_and_json_events(ws, mock_client):
    names = sdk_event_names(mock_client)
    assert names.count("content_block_delta:text_delta") >= 2
    assert names.count("content_block_delta:input_json_delta") >= 2
    assert names[0] == "message_start" and names[-1] == "message_stop"


def test_ctrl_c_at_any_event_leaves_a_valid_journal(ws, mock_client):
    names = sdk_event_names(mock_client)
    for position, name in enumerate(names):
        where = f"Ctrl-C at event {position} ({name})"
        checklib.fresh_state()
        mock, client = mock_client([reply(PLAN, tool_call("write_file", HELLO))])
        plan = CtrlC("*", position + 1)
        kesi.UI = Screen()
        history = [{"role": "user", "content": "Create hello.py."}]
        answer = kesi.run_agent(plan.attach(client), history)
        assert plan.fired and plan.timeline[-1] == name, where
        assert not answer.ok and history[-1] == {"role": "assistant", "content": answer.text}, where
        assert not dangling_tool_uses(history), where
        assert not (ws / "hello.py").exists(), where          # an interrupted tool never runs
        assert_only_complete_blocks(history, where)
        started = position > 0
        assert (plan.snapshot_reads > 0) == started, where
        assert [c["partial"] for c in kesi.METER.calls] == ([True] if started else []), where
        assert accepted_by_mock(client, history) == "end_turn", where


def test_a_complete_tool_use_is_kept_and_answered_state_unknown(ws, mock_client):
    mock, client = mock_client([reply(PLAN, tool_call("write_file", HELLO))])
    history = [{"role": "user", "content": "Create hello.py."}]
    kesi.run_agent(CtrlC("message_delta").attach(client), history)
    assert [b["type"] for b in history[1]["content"]] == ["text", "tool_use"]
    result = history[2]["content"][0]
    assert result["tool_use_id"] == history[1]["content"][1]["id"]
    assert result["content"] == kesi.STATE_UNKNOWN and result["is_error"] is True
    assert not (ws / "hello.py").exists()


def test_ctrl_c_while_waiting_for_the_first_byte(ws, mock_client):
    mock, client = mock_client([reply("Too late.", delay=3.0)])
    history = [{"role": "user", "content": "hi"}]
    with day17.ctrl_c_raises():
        day17.ctrl_c_once_the_mock_has_the_request(mock)
        answer = kesi.run_agent(client, history)
    assert not answer.ok and len(history) == 2 and not kesi.METER.calls
    assert accepted_by_mock(client, history) == "end_turn"


def test_ctrl_c_between_stream_and_tool_is_sealed_by_run_turn(ws, mock_client, monkeypatch):
    """The known gap: the key lands after the stream, before the tool starts."""
    mock, client = mock_client([reply(PLAN, tool_call("write_file", HELLO))])
    real_ui = kesi.ui

    def ui(text="", end="\n"):
        if "[tool]" in text:
            day17.press_ctrl_c()
        real_ui(text, end)

    monkeypatch.setattr(kesi, "ui", ui)
    history = []
    answer = kesi.run_turn(client, history, "Create hello.py.")
    assert not answer.ok and not dangling_tool_uses(history)
    assert history[-1]["content"][0]["content"] == kesi.STATE_UNKNOWN
    assert not (ws / "hello.py").exists()
    assert accepted_by_mock(client, history) == "end_turn"


# --- the connection breaks: a real TCP reset after k SSE events ---------------------

def test_connection_reset_at_any_point_is_survived(ws, mock_client):
    for cut in range(sse_event_count()):
        where = f"reset after {cut} SSE events"
        checklib.fresh_state()
        mock, client = mock_client([reply(PLAN, tool_call("write_file", HELLO), cut_after=cut)], max_retries=0)
        history = [{"role": "user", "content": "Create hello.py."}]
        answer = kesi.run_agent(client, history)          # must not raise
        assert not answer.ok and len(history) == 2, where
        kept = history[1]["content"]
        assert kept[-1] == {"type": "text", "text": answer.text} and answer.text.startswith("Error:"), where
        assert [b["text"] for b in kept[:-1]] in ([], [PLAN]), where   # finished text only, never a tool_use
        assert not (ws / "hello.py").exists(), where
        assert len(kesi.METER.calls) <= 1 and all(c["partial"] for c in kesi.METER.calls), where
        assert accepted_by_mock(client, history) == "end_turn", where


# --- the thinking note ----------------------------------------------------------------------------

class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_thinking_note_on_a_real_terminal_is_erased_when_the_answer_starts(ws, mock_client, monkeypatch):
    screen = FakeTTY()
    monkeypatch.setattr(kesi, "UI", screen)
    monkeypatch.setenv("TERM", "xterm")
    mock, client = mock_client(["Here it is."])
    answer = kesi.run_turn(client, [], "hello")
    shown = screen.getvalue()
    assert answer.text == "Here it is."
    assert shown.index("(thinking...)") < shown.index("\r\033[K") < shown.index("KeSi > Here it is.")


def test_no_thinking_note_when_output_is_not_a_terminal(ws, mock_client, notices):
    mock, client = mock_client(["Plain."])
    kesi.run_turn(client, [], "hello")
    assert "thinking" not in notices.getvalue() and "\033" not in notices.getvalue()


# --- the body KeSi encodes itself (kesi.open_stream) ---------------------------------

class RawBodies(MockAPI):
    """The mock, keeping each request's bytes as they came."""

    def _log(self, h, raw):
        entry = super()._log(h, raw)
        entry["raw"] = raw
        return entry


def test_the_body_kesi_encodes_is_the_one_the_sdk_would_send(ws):
    history = [{"role": "user", "content": 'Résumé ✓ 日本語 \u2028 <b>&"x"\\ 🙂'}]
    with RawBodies([reply("one"), reply("two")]) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0)
        request = kesi.request_for(history, kesi.MAIN_AGENT)
        with client.messages.stream(**request) as stream:
            assert stream.get_final_message().content[0].text == "one"
        with kesi.open_stream(client, request) as stream:
            assert stream.get_final_message().content[0].text == "two"
    sdk, ours = mock.requests
    assert sdk["status"] == ours["status"] == 200 and ours["body"] == sdk["body"]
    style = {"ensure_ascii": False, "separators": (",", ":")}
    assert json.dumps(sdk["body"], **style).encode() == sdk["raw"]          # how the SDK encodes
    reordered = {k: sdk["body"][k] for k in ours["body"]}         # only the order of the top-level keys differs
    assert json.dumps(reordered, **style).encode() == ours["raw"]
    telemetry = ("x-stainless-helper-method", "x-stainless-stream-helper")
    assert {k: v for k, v in sdk["headers"].items() if k not in telemetry} == ours["headers"]


def test_a_result_cleared_after_it_was_sent_goes_out_cleared(ws, mock_client):
    """request_body keeps the JSON of messages it sent; clearing makes new ones, so the next body is current."""
    mock, client = mock_client([reply(f"answer {n}") for n in range(2)])
    history = [{"role": "user", "content": "read them all"}]
    for n in range(kesi.KEEP_RECENT_RESULTS + 2):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "glob",
                                                       "input": {"pattern": "*"}}]},
                    {"role": "user", "content": [kesi.tool_result(f"t{n}", f"file {n}\n" * 200, False)]}]
    for clear in (True, False):
        with kesi.open_stream(client, kesi.request_for(history, kesi.MAIN_AGENT)) as stream:
            stream.get_final_message()
        if clear:
            assert kesi.clear_old_tool_results(history)[0] == 2
    first, second = (r["body"]["messages"] for r in mock.requests)
    assert [m["content"][0]["content"][:6] for m in first[2:6:2]] == ["file 0", "file 1"]
    assert [m["content"][0]["content"] for m in second[2:6:2]] == [kesi.CLEARED_RESULT] * 2
    assert second[6:] == first[6:]
