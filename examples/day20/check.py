# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 20 checks: the todo plan and the task sub-agent.

The real agent loop runs against the mock API: todo_write keeps a visible
plan; task starts a sub-agent in a fresh context whose conclusion is all
that reaches the main history, with its cost on the meter.
Run: uv run examples/day20/check.py
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, capture_ui, mock_client, tool_results, workspace   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 20: todo plan and sub-agent")

PLAN = [{"content": "Read the failing test", "status": "in_progress"},
        {"content": "Fix the bug", "status": "pending"},
        {"content": "Run the tests", "status": "pending"}]
PLAN_LATER = [{"content": "Read the failing test", "status": "completed"},
              {"content": "Fix the bug", "status": "in_progress"},
              {"content": "Run the tests", "status": "pending"}]
PROJECT = {"src/app.py": "from util import parse_config\n\nprint(parse_config('a=1'))\n",
           "src/util.py": "def parse_config(text):\n    return dict(line.split('=') for line in text.splitlines())\n",
           "README.md": "A tiny app.\n"}
QUESTION = "Where is parse_config defined, and what does it return?"
CONCLUSION = "parse_config is defined in src/util.py line 1; it returns a dict of key=value pairs."


def tool_names(body: dict) -> set:
    return {t["name"] for t in body.get("tools", [])}


def check_todo_plan():
    script = [reply("I will plan this first.", tool_call("todo_write", {"todos": PLAN})),
              reply(tool_call("todo_write", {"todos": PLAN_LATER})),
              reply("Plan updated; the test is read.")]
    with workspace(), mock_client(script) as (mock, client):
        screen = capture_ui()
        history = []
        answer = kesi.run_turn(client, history, "The test keeps failing, please fix it.")
        shown = screen.getvalue()
        checks.check("the agent finishes a run that keeps a plan", answer.ok and len(mock.requests) == 3, answer)
        checks.check("the plan is printed on the terminal as it changes",
                     "Plan:" in shown and "[>] Read the failing test" in shown
                     and "[x] Read the failing test" in shown and "[>] Fix the bug" in shown, shown)
        checks.check("TODOS holds the latest list", kesi.TODOS == PLAN_LATER, kesi.TODOS)
        first_result = tool_results(mock.requests[1]["body"]["messages"])[-1]
        checks.check("the model gets the saved plan back as the tool result",
                     first_result["is_error"] is False and "(0/3 done)" in first_result["content"]
                     and "[ ] Run the tests" in first_result["content"], first_result)
        screen = capture_ui()
        kesi.handle_slash("/todo", client, history)
        checks.check("/todo shows the current plan",
                     "[x] Read the failing test" in screen.getvalue() and "[ ] Run the tests" in screen.getvalue(),
                     screen.getvalue())
        kesi.handle_slash("/reset", client, history)
        checks.check("/reset clears the plan", kesi.TODOS == [] and "no todo list" in kesi.render_todos())


def check_todo_validation():
    with workspace():
        capture_ui()
        kesi.todo_write(PLAN)
        two_active = [dict(t, status="in_progress") for t in PLAN[:2]]
        cases = {"two items in_progress": two_active,
                 "an unknown status": [{"content": "Fix", "status": "doing"}],
                 "an empty list": [],
                 "a blank step": [{"content": "  ", "status": "pending"}],
                 "a missing status": [{"content": "Fix"}]}
        for name, todos in cases.items():
            output, is_error = kesi.call_tool({"name": "todo_write", "input": {"todos": todos}})
            checks.check(f"todo_write refuses {name}", is_error and output.startswith("Error:"), output)
        checks.check("a refused list leaves the plan unchanged", kesi.TODOS == PLAN, kesi.TODOS)
        script = [reply(tool_call("todo_write", {"todos": two_active})), reply("Fixed my plan.")]
        with mock_client(script) as (mock, client):
            kesi.run_agent(client, [{"role": "user", "content": "plan it"}])
            result = tool_results(mock.requests[1]["body"]["messages"])[-1]
        checks.check("the model is told why, as an error tool result",
                     result["is_error"] is True and "only one todo can be in_progress" in result["content"], result)


def sub_agent_script():
    return [reply(tool_call("read_file", {"file_path": "src/app.py"})),
            reply("A sub-agent can search this.",
                  tool_call("task", {"prompt": QUESTION, "description": "find parse_config"})),
            reply(tool_call("grep", {"pattern": "def parse_config"})),     # from here: the sub-agent
            reply(tool_call("read_file", {"file_path": "src/util.py"})),
            reply(CONCLUSION),
            reply("It lives in src/util.py and returns a dict.")]          # the main agent again


def check_sub_agent():
    with workspace(PROJECT) as root, mock_client(sub_agent_script()) as (mock, client):
        screen = capture_ui()
        history = []
        answer = kesi.run_turn(client, history, "Explain parse_config.")
        bodies = [r["body"] for r in mock.requests]
        checks.check("the whole run is accepted by the API", answer.ok and len(bodies) == 6
                     and all(r["status"] == 200 for r in mock.requests), [r["status"] for r in mock.requests])
        first_sub = bodies[2]
        checks.check("the sub-agent starts a 1-message conversation holding only its question",
                     len(first_sub["messages"]) == 1 and kesi.text_of(first_sub["messages"][0]["content"]) == QUESTION,
                     first_sub["messages"])
        checks.check("the sub-agent is offered only the read-only tools",
                     tool_names(first_sub) == {"read_file", "list_files", "glob", "grep"}, tool_names(first_sub))
        checks.check("the sub-agent has its own system prompt",
                     first_sub["system"][0]["text"] == kesi.SUBAGENT_RULES
                     and bodies[0]["system"][0]["text"] == kesi.SYSTEM_RULES)
        checks.check("the sub-agent's history never holds the main agent's reads",
                     all("from util import parse_config" not in json.dumps(b["messages"]) for b in bodies[2:5]))
        last = bodies[5]
        task_result = tool_results(last["messages"])[-1]
        checks.check("only the conclusion comes back, as the task tool result",
                     task_result["content"] == CONCLUSION and task_result["is_error"] is False, task_result)
        checks.check("the sub-agent's searching stays out of the main history",
                     len(last["messages"]) == 5 and "src/util.py:1:" not in json.dumps(last["messages"])
                     and "grep" not in json.dumps(history), len(last["messages"]))
        labels = [c["label"] for c in kesi.METER.calls]
        checks.check("its three requests are on the meter as sub-agent",
                     labels == ["main", "main", "sub-agent", "sub-agent", "sub-agent", "main"], labels)
        checks.check("its usage is counted", sum(c["input"] + c["cache_read"] + c["cache_write"]
                                                 for c in kesi.METER.calls if c["label"] == "sub-agent") > 0)
        checks.check("the turn's cost line mentions the sub-agent requests",
                     "3 by sub-agents or compaction" in screen.getvalue(), screen.getvalue()[-400:])
        checks.check("the terminal shows the sub-agent and its tool calls",
                     "[sub-agent] find parse_config" in screen.getvalue() and "      [tool] grep(" in screen.getvalue())
        read_by_main = {root / "src" / "app.py"}
        checks.check("the sub-agent's reads do not change the main agent's READ_VERSIONS",
                     set(kesi.READ_VERSIONS) == read_by_main, sorted(map(str, kesi.READ_VERSIONS)))
        output, is_error = kesi.write_file("src/util.py", "overwritten\n")
        checks.check("so the main agent still may not overwrite a file only the sub-agent read",
                     is_error and (root / "src" / "util.py").read_text() == PROJECT["src/util.py"], output)


def check_sub_agent_cannot_write():
    script = [reply(tool_call("task", {"prompt": "Create notes.txt"})),
              reply(tool_call("write_file", {"file_path": "notes.txt", "content": "hi"})),
              reply("I could not write it."),
              reply("The sub-agent cannot write files.")]
    with workspace(PROJECT) as root, mock_client(script) as (mock, client):
        capture_ui()
        kesi.PERMISSION_MODE = "bypassPermissions"       # even then: the tool is not the sub-agent's
        kesi.run_agent(client, [{"role": "user", "content": "make notes"}])
        refusal = tool_results(mock.requests[2]["body"]["messages"])[-1]
        checks.check("a write tool asked for by the sub-agent is refused and nothing is written",
                     refusal["is_error"] and "no tool named write_file" in refusal["content"]
                     and not (root / "notes.txt").exists(), refusal)


check_todo_plan()
check_todo_validation()
check_sub_agent()
check_sub_agent_cannot_write()
sys.exit(checks.finish())
