"""todo_write (the plan) and the task sub-agent, at their edges (the day20
check covers the main story)."""

import pytest

import kesi
from checklib import capture_ui, tool_results, tool_use
from mock_api import error, reply, tool_call


# --- todo_write -----------------------------------------------------------------------------------

PLAN = [{"content": "Look", "status": "completed"}, {"content": "Fix", "status": "in_progress"}]


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


# --- the task sub-agent ---------------------------------------------------------------------------

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


def test_a_description_that_is_not_text_still_runs_the_sub_agent(ws, mock_client, monkeypatch):
    """Called directly (not through call_tool's schema check), an odd description is shown, never raised on."""
    mock, client = mock_client([reply("found it")])
    monkeypatch.setattr(kesi, "CLIENT", client)
    shown = capture_ui()
    assert kesi.task(".", description=True) == ("found it", False)
    assert "[sub-agent] True" in shown.getvalue()
    assert mock.requests[-1]["body"]["messages"][0]["content"] == "."


def test_interrupted_sub_agent_interrupts_the_batch(ws, monkeypatch, notices):
    monkeypatch.setattr(kesi, "CLIENT", object())
    monkeypatch.setattr(kesi, "run_agent",
                        lambda client, history, agent=None: kesi.Answer("x", ok=False, interrupted=True))
    with pytest.raises(KeyboardInterrupt):
        kesi.task("where is main?")
    (ws / "a.txt").write_text("a\n")
    uses = [tool_use("t1", "task", {"prompt": "where is main?"}),
            tool_use("t2", "read_file", {"file_path": "a.txt"})]
    results, interrupted = kesi.run_tools(uses, kesi.MAIN_AGENT)
    assert interrupted
    assert [r["content"] for r in results] == [kesi.INTERRUPTED_TOOL, kesi.SKIPPED_TOOL]
    assert kesi.READ_VERSIONS == {}                       # read_file never ran
