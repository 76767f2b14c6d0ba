"""Beyond the series: todo_write, the task sub-agent, context management and
sessions, at their edges (the examples/day19-21 checks cover the main story)."""
import json

import kesi
from checklib import capture_ui, tool_results
from mock_api import error, reply, tool_call

PLAN = [{"content": "Look", "status": "completed"}, {"content": "Fix", "status": "in_progress"}]


def is_compaction(body: dict) -> bool:
    """A summary request: a normal request whose last user message asks for the summary."""
    last = body["messages"][-1]
    return last["role"] == "user" and kesi.COMPACT_PROMPT[:60] in kesi.text_of(last["content"])


# --- todo_write ----------------------------------------------------------------

def test_todo_plan_is_printed_indented_and_stripped(ws):
    shown = capture_ui()
    output, is_error = kesi.todo_write([{"content": "  Look  ", "status": "completed"},
                                        {"content": "Fix", "status": "in_progress"}])
    assert not is_error and output.startswith("Todo list saved (1/2 done)")
    assert kesi.TODOS == PLAN
    assert "  Plan:\n    [x] Look\n    [>] Fix" in shown.getvalue()


def test_todo_write_rejects_shapes_that_are_not_a_list_of_items(ws):
    kesi.todo_write(PLAN)
    for bad in ("Look, Fix", {"content": "Fix"}, [["Fix", "pending"]], [{"content": 3, "status": "pending"}],
                [{"content": "Fix", "status": ["pending"]}]):
        output, is_error = kesi.call_tool({"name": "todo_write", "input": {"todos": bad}})
        assert is_error and output.startswith("Error"), bad
    assert kesi.TODOS == PLAN


def test_reset_forgets_the_plan_and_starts_a_new_session(ws, mock_client):
    mock, client = mock_client([reply(tool_call("todo_write", {"todos": PLAN})), reply("ok")])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "plan")
    assert kesi.TODOS == PLAN
    kesi.handle_slash("/reset", client, history)
    assert history == [] and kesi.TODOS == [] and kesi.SESSION_FILE is None


# --- the task sub-agent ------------------------------------------------------------

def test_sub_agent_api_failure_comes_back_as_an_error_result(ws, mock_client):
    (ws / "a.txt").write_text("alpha\n")
    (ws / "b.txt").write_text("beta\n")
    script = [reply(tool_call("read_file", {"file_path": "a.txt"})),
              reply(tool_call("task", {"prompt": "find things"})),
              reply(tool_call("read_file", {"file_path": "b.txt"})),                # sub-agent reads ...
              error(400, "sub-agent request rejected (mock)"),                      # ... then fails
              reply("The sub-agent failed; I will look myself.")]
    mock, client = mock_client(script)
    capture_ui()
    answer = kesi.run_agent(client, [{"role": "user", "content": "go"}])
    versions = dict(kesi.READ_VERSIONS)
    task_result = tool_results(mock.requests[-1]["body"]["messages"])[-1]
    assert answer.ok and answer.text == "The sub-agent failed; I will look myself."
    assert task_result["is_error"] is True and "sub-agent request rejected (mock)" in task_result["content"]
    assert list(versions) == [ws / "a.txt"]          # restored exactly, even after the failure
    assert [c["label"] for c in kesi.METER.calls] == ["main", "main", "sub-agent", "main"]


def test_sub_agent_turn_limit_is_reported_to_the_main_agent(ws, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "MAX_TURNS", 3)
    looping = reply(tool_call("list_files", {}))
    mock, client = mock_client([reply(tool_call("task", {"prompt": "loop"})), looping, looping, looping,
                                reply("Gave up on the sub-agent.")])
    capture_ui()
    answer = kesi.run_agent(client, [{"role": "user", "content": "go"}])
    task_result = tool_results(mock.requests[-1]["body"]["messages"])[-1]
    assert answer.text == "Gave up on the sub-agent."
    assert task_result["is_error"] and "stopped after 3 model round trips" in task_result["content"]


def test_sub_agent_text_is_not_streamed_to_the_terminal(ws, mock_client):
    mock, client = mock_client([reply(tool_call("task", {"prompt": "q"})), reply("SECRET CONCLUSION"),
                                reply("main answer")])
    shown = capture_ui()
    kesi.run_agent(client, [{"role": "user", "content": "go"}])
    assert "KeSi > SECRET CONCLUSION" not in shown.getvalue()
    assert "KeSi > main answer" in shown.getvalue()


def test_task_needs_a_prompt_and_a_client(ws, monkeypatch):
    assert kesi.task("  ")[1] is True
    monkeypatch.setattr(kesi, "CLIENT", None)
    output, is_error = kesi.task("where is main?")
    assert is_error and "no API client" in output


# --- context management ---------------------------------------------------------------

def tool_round(n: int, size: int) -> list[dict]:
    use = {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"file_path": f"f{n}"}}
    return [{"role": "assistant", "content": [use]},
            {"role": "user", "content": [kesi.tool_result(f"toolu_{n}", "y" * size, False)]}]


def test_clearing_keeps_the_newest_and_the_small_results():
    history = [{"role": "user", "content": "go"}]
    for n, size in enumerate([2000, 100, 2000, 2000, 2000, 2000, 2000]):
        history += tool_round(n, size)
    assert kesi.clear_old_tool_results(history) == 2          # f0 and f2; f1 is small
    contents = [r["content"] for m in history[1:] if m["role"] == "user" for r in m["content"]]
    assert contents[0] == contents[2] == kesi.CLEARED_RESULT
    assert contents[1] == "y" * 100 and all(c == "y" * 2000 for c in contents[3:])
    assert kesi.clear_old_tool_results(history) == 0          # the stub itself is never "large"


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
    assert not kesi.compact_history(client, history)          # a tool call, then (without tools) no text: no summary
    assert "no summary" in shown.getvalue() and "tools" not in mock.requests[-1]["body"]
    assert history == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]


def test_compact_with_nothing_to_compact_sends_nothing(ws, mock_client):
    mock, client = mock_client()
    assert kesi.handle_slash("/compact", client, []) is True
    assert mock.requests == []


# --- sessions ---------------------------------------------------------------------------

def test_session_round_trip_keeps_unicode_and_blocks(ws):
    history = [{"role": "user", "content": "幫我看 config.py"},
               {"role": "assistant", "content": [{"type": "text", "text": "好"}, tool_round(1, 5)[0]["content"][0]]},
               tool_round(1, 5)[1]]
    kesi.save_session(history)
    assert kesi.SESSION_FILE.parent == ws / ".kesi" / "sessions"
    assert "幫我看" in kesi.SESSION_FILE.read_text(encoding="utf-8")      # stored readable, not \\u escapes
    assert kesi.load_session(kesi.SESSION_FILE) == history


def test_bad_session_files_raise_readable_errors(ws):
    folder = ws / ".kesi" / "sessions"
    folder.mkdir(parents=True)
    cases = {"role.jsonl": ('{"kesi_session": 1}\n{"role": "system", "content": "x"}\n', "line 2 is not a message"),
             "content.jsonl": ('{"kesi_session": 1}\n{"role": "user", "content": 5}\n', "line 2 is not a message"),
             "list.jsonl": ('{"kesi_session": 1}\n[1, 2]\n', "line 2 is not a message")}
    for name, (text, reason) in cases.items():
        (folder / name).write_text(text)
        try:
            kesi.load_session(folder / name)
            raise AssertionError(f"{name} loaded")
        except ValueError as exc:
            assert reason in str(exc) and name in str(exc)
    (folder / "bytes.jsonl").write_bytes(b'{"kesi_session": 1}\n\xff\xfe\n')
    try:
        kesi.load_session(folder / "bytes.jsonl")
        raise AssertionError("bytes.jsonl loaded")
    except ValueError as exc:
        assert "cannot read bytes.jsonl" in str(exc)


def test_resume_picks_by_number_and_saves_back_into_that_file(ws, mock_client):
    mock, client = mock_client([reply("one"), reply("two"), reply("three")])
    shown = capture_ui()
    history = []
    kesi.run_turn(client, history, "first session")
    first = kesi.SESSION_FILE
    kesi.handle_slash("/reset", client, history)
    kesi.run_turn(client, history, "second session")
    assert len(kesi.list_sessions()) == 2 and first.exists()
    kesi.READ_VERSIONS[ws / "x"] = b"digest"
    kesi.handle_slash("/resume 9", client, history)
    assert "Pick a number from 1 to 2" in shown.getvalue()
    number = kesi.list_sessions().index(first) + 1
    kesi.handle_slash(f"/resume {number}", client, history)
    assert kesi.SESSION_FILE == first and kesi.READ_VERSIONS == {}
    assert [kesi.text_of(m["content"]) for m in history] == ["first session", "one"]
    kesi.run_turn(client, history, "more")
    assert len(first.read_text().splitlines()) == 1 + 4


def test_resume_without_sessions_and_unwritable_sessions(ws, mock_client):
    mock, client = mock_client()
    shown = capture_ui()
    kesi.handle_slash("/resume", client, [])
    assert "No saved sessions" in shown.getvalue()
    (ws / ".kesi").write_text("a file where the folder should be")
    kesi.save_session([{"role": "user", "content": "hi"}])
    assert "could not save the session" in shown.getvalue()
