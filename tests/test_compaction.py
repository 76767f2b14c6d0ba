"""Context management. Compaction under the real API's rules: it streams (the
SDK refuses a large non-streaming max_tokens), never raises (Ctrl-C included),
reads the conversation from the prompt cache, and survives an endpoint that
answers with a tool call. Also clearing old tool results, the token estimate
and when compaction runs (the day19 check covers the main story). Real SDK
against the mock."""
import importlib.util
import json
from pathlib import Path

import pytest

import kesi
from checklib import capture_ui, tool_use
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


def test_a_tool_call_instead_of_a_summary_is_asked_again_with_tool_choice_none(ws, mock_client, monkeypatch):
    """The same tools, so the tools and the system prompt are still read from the cache
    (a changed tool_choice invalidates only the messages' entries, as the docs say)."""
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-5")     # its 1,024 minimum: the fixed prefix is cached
    mock, client = mock_client(["one", "two", reply(None, tool_call("list_files", {})), "SUMMARY."])
    capture_ui()
    history = conversation(client)
    assert kesi.compact_history(client, history)
    assert "SUMMARY." in history[0]["content"]
    first, again = mock.requests[2]["body"], mock.requests[3]["body"]
    assert again["tools"] == first["tools"] and "tool_choice" not in first
    assert again["tool_choice"] == {"type": "none"}
    assert 0 < mock.requests[3]["usage"]["cache_read_input_tokens"] < mock.requests[2]["usage"]["cache_read_input_tokens"]
    assert [c["label"] for c in kesi.METER.calls].count("compact") == 2


def test_an_endpoint_that_refuses_tool_choice_none_is_asked_without_tools(ws, mock_client):
    refuse_none = lambda body: (error(400, "tool_choice: 'none' is not supported (mock)")
                                if body.get("tool_choice") == {"type": "none"} else reply("unexpected"))
    mock, client = mock_client(["one", "two", reply(None, tool_call("list_files", {})), refuse_none, "SUMMARY."])
    capture_ui()
    history = conversation(client)
    assert kesi.compact_history(client, history)
    assert "SUMMARY." in history[0]["content"]
    assert [r["status"] for r in mock.requests[2:]] == [200, 400, 200]
    assert "tools" not in mock.requests[4]["body"] and "tool_choice" not in mock.requests[4]["body"]


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


# --- clearing old tool results, the token estimate, and when compaction runs ----------------------

def test_cjk_text_is_not_underestimated():
    history = [{"role": "user", "content": "字" * 1000}]
    assert kesi.estimate_tokens(history, kesi.MAIN_AGENT) - kesi.estimate_tokens([], kesi.MAIN_AGENT) >= 1000


def tool_round(n: int, size: int) -> list[dict]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"file_path": f"f{n}"}}
    return [{"role": "assistant", "content": [use]},
            {"role": "user", "content": [kesi.tool_result(f"toolu_{n}", "y" * size, False)]}]


def test_clearing_keeps_the_newest_and_the_small_results():
    history = [{"role": "user", "content": "go"}]
    for n, size in enumerate([2000, 100, 2000, 2000, 2000, 2000, 2000]):
        history += tool_round(n, size)
    assert kesi.clear_old_tool_results(history)[0] == 2          # f0 and f2; f1 is small
    contents = [r["content"] for m in history[1:] if m["role"] == "user" for r in m["content"]]
    assert contents[0] == contents[2] == kesi.CLEARED_RESULT
    assert contents[1] == "y" * 100 and all(c == "y" * 2000 for c in contents[3:])
    assert kesi.clear_old_tool_results(history)[0] == 0          # the stub itself is never "large"


def test_clearing_old_read_results_forgets_their_file_versions(ws):
    count = kesi.KEEP_RECENT_RESULTS + 1
    history = [{"role": "user", "content": "read them all"}]
    for i in range(count):
        (ws / f"f{i}.txt").write_text(f"file {i} " + "y" * 600 + "\n")
        output, is_error = kesi.read_file(f"f{i}.txt")
        assert not is_error and len(output) >= kesi.MIN_CLEARABLE_CHARS
        history.append({"role": "assistant", "content": [tool_use(f"r{i}", "read_file", {"file_path": f"f{i}.txt"})]})
        history.append({"role": "user", "content": [kesi.tool_result(f"r{i}", output, False)]})
    assert len(kesi.READ_VERSIONS) == count

    assert kesi.clear_old_tool_results(history)[0] == 1
    assert history[2]["content"][0]["content"] == kesi.CLEARED_RESULT
    assert set(kesi.READ_VERSIONS) == {ws / f"f{i}.txt" for i in range(1, count)}
    output, is_error = kesi.write_file("f0.txt", "overwritten from memory\n")
    assert is_error
    assert (ws / "f0.txt").read_text().startswith("file 0 ")


def test_below_the_threshold_nothing_happens(ws, mock_client):
    mock, client = mock_client()
    history = [{"role": "user", "content": "go"}] + tool_round(1, 5000)
    before = json.dumps(history)
    kesi.manage_context(client, history, kesi.MAIN_AGENT)
    assert json.dumps(history) == before and mock.requests == []


def summarising(steps):
    queue = list(steps)
    return lambda body, n: reply("SUMMARY.") if is_compaction(body) else queue.pop(0)


def test_auto_compaction_at_turn_start_keeps_the_new_prompt(ws, mock_client, monkeypatch):
    mock, client = mock_client(summarising([reply("first"), reply("answer to the new prompt")]))
    capture_ui()
    history = []
    kesi.run_turn(client, history, "first question " + "z" * 4000)
    monkeypatch.setattr(kesi, "CONTEXT_WINDOW", kesi.estimate_tokens(history, kesi.MAIN_AGENT))
    answer = kesi.run_turn(client, history, "the new prompt")
    sent = mock.requests[-1]["body"]["messages"]
    assert is_compaction(mock.requests[1]["body"]) and answer.text == "answer to the new prompt"
    assert [kesi.text_of(m["content"]) for m in sent][1:] == ["Understood. I will continue from this summary.",
                                                             "the new prompt"]
    assert all(r["status"] == 200 for r in mock.requests)


def test_new_prompt_after_a_sealed_round_survives_compaction(ws, mock_client):
    """A resumed session that ended mid-tool is sealed (user tool_result);
    the next prompt then follows another user message. Compaction must keep
    that prompt rather than fold it away unseen."""
    mock, client = mock_client(summarising([reply("continuing")]))
    history = [{"role": "user", "content": "read f1"}, tool_round(1, 10)[0]]
    kesi.seal_dangling_tool_use(history)
    history.append({"role": "user", "content": "now do the next thing"})
    assert kesi.compact_history(client, history)
    assert kesi.text_of(history[-1]["content"]) == "now do the next thing"
    kesi.run_agent(client, history)
    assert mock.requests[-1]["status"] == 200


def test_after_compaction_files_must_be_read_again_before_overwriting(ws, mock_client):
    """The summary does not hold the file; overwriting it from memory would lose what was forgotten."""
    (ws / "notes.txt").write_text("line one\nline two\n")
    mock, client = mock_client(summarising([]))
    assert kesi.read_file("notes.txt")[1] is False and kesi.READ_VERSIONS
    history = [{"role": "user", "content": "read notes.txt"}, {"role": "assistant", "content": "It has two lines."}]
    assert kesi.compact_history(client, history)
    output, is_error = kesi.write_file("notes.txt", "line one\n")
    assert is_error and (ws / "notes.txt").read_text() == "line one\nline two\n"


def test_failed_or_empty_compaction_keeps_the_history(ws, mock_client):
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    mock, client = mock_client([error(400, "prompt is too long (mock)"), reply(None, tool_call("grep", {"pattern": "x"})),
                                reply(None)])
    shown = capture_ui()
    assert not kesi.compact_history(client, history)
    assert "compaction failed, history kept" in shown.getvalue()
    assert not kesi.compact_history(client, history)          # a tool call, then (tool_choice none) no text
    assert "no summary" in shown.getvalue() and mock.requests[-1]["body"]["tool_choice"] == {"type": "none"}
    assert history == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


def test_compact_on_empty_history(ws, notices):
    assert kesi.handle_slash("/compact", None, []) is True
    assert "nothing to compact" in notices.getvalue()


def test_compact_with_nothing_to_compact_sends_nothing(ws, mock_client):
    mock, client = mock_client()
    assert kesi.handle_slash("/compact", client, []) is True
    assert mock.requests == []
