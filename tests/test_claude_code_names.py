"""Claude Code's spellings, headless through the real SDK against the mock:
--allowedTools / --disallowedTools / --permission-mode and its tool names,
ANTHROPIC_MODEL, -r/--resume ID, result subtypes, the session id on every
stream-json line, Write(...) rules, and plan mode."""
import json
import subprocess

import pytest

import checklib
from mock_api import MockAPI, reply, tool_call


@pytest.fixture
def run(main_in_process):
    """run(folder, *args, mock=, **env): kesi.py's main() with these flags, in folder, with an empty piped stdin,
    here in this process (flags and output are the subject, not the process: a child would spend its seconds
    importing the SDK); the exit code, stdout and stderr as a CompletedProcess. Each run starts afresh."""
    def in_folder(cwd, *args, mock=None, **env):
        checklib.fresh_state()
        checklib.use_base_dir(cwd)
        code, out, err = main_in_process(list(args), "", mock, KESI_SANDBOX="off", **env)
        return subprocess.CompletedProcess(args, code, out, err)
    return in_folder


def results_of(mock, request: int) -> list[dict]:
    return mock.requests[request]["body"]["messages"][-1]["content"]


def test_claude_code_flag_and_tool_names(tmp_path, run):
    script = [reply(tool_call("run_command", {"command": "touch made.txt"}),
                    tool_call("write_file", {"file_path": "notes.md", "content": "hi\n"})), "done"]
    (no_bash := tmp_path / "no-bash").mkdir(), (bare := tmp_path / "bare-bash").mkdir()
    with MockAPI(script) as mock, MockAPI(["ok"]) as no_bash_mock, MockAPI() as bare_mock:
        proc = run(tmp_path, "-p", "go", "--allowedTools", "Bash(touch made.txt:*) Write Read",
                   "--disallowedTools", "Grep,Task", mock=mock)
        run(no_bash, "-p", "go", "--disallowed-tools", "Bash", mock=no_bash_mock)
        bare_proc = run(bare, "-p", "go", "--allowedTools", "Bash", mock=bare_mock)
    assert proc.returncode == 0, proc.stderr
    tools = [t["name"] for t in mock.requests[0]["body"]["tools"]]
    assert "grep" not in tools and "task" not in tools and "read_file" in tools
    assert [r["is_error"] for r in results_of(mock, 1)] == [False, False]
    assert (tmp_path / "made.txt").exists() and (tmp_path / "notes.md").read_text() == "hi\n"
    assert "run_command" not in [t["name"] for t in no_bash_mock.requests[0]["body"]["tools"]]
    assert bare_proc.returncode == 2 and "--permission-mode auto" in bare_proc.stderr and bare_mock.requests == []


def test_write_rules_in_settings_allow_edits(tmp_path, run):
    config = tmp_path / "config"
    (config / "kesi").mkdir(parents=True)
    (config / "kesi" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Write(docs/**)"]}}))
    (tmp_path / "work").mkdir()
    script = [reply(tool_call("write_file", {"file_path": "docs/a.md", "content": "a\n"}),
                    tool_call("write_file", {"file_path": "b.md", "content": "b\n"})), "done"]
    with MockAPI(script) as mock:
        run(tmp_path / "work", "-p", "go", mock=mock, XDG_CONFIG_HOME=str(config))
    assert [r["is_error"] for r in results_of(mock, 1)] == [False, True]


def test_anthropic_model_and_the_permission_mode_spellings(tmp_path, run):
    # --permission-mode plan, with ANTHROPIC_MODEL too: test_plan_mode_tells_the_model_and_refuses_changes.
    script = [reply(tool_call("write_file", {"file_path": "a.md", "content": "a\n"})), "done"]
    (both := tmp_path / "both-models").mkdir()
    with MockAPI(script) as mock, MockAPI(["ok"]) as both_mock:
        proc = run(tmp_path, "-p", "go", "--permissionMode", "acceptEdits", mock=mock,
                   ANTHROPIC_MODEL="claude-sonnet-4-5")
        run(both, "-p", "go", mock=both_mock, ANTHROPIC_MODEL="claude-sonnet-4-5", KESI_MODEL="claude-haiku-4-5")
    assert proc.returncode == 0, proc.stderr
    assert mock.requests[0]["body"]["model"] == "claude-sonnet-4-5"
    assert results_of(mock, 1)[0]["is_error"] is False
    assert "plan mode, which is read-only" in proc.stderr or (tmp_path / "a.md").exists()
    assert both_mock.requests[0]["body"]["model"] == "claude-haiku-4-5"        # KeSi's own setting wins


def test_plan_mode_tells_the_model_and_refuses_changes(tmp_path, run):
    script = [reply(tool_call("run_command", {"command": "touch x"}),
                    tool_call("write_file", {"file_path": "a.md", "content": "a\n"})), "The plan: 1. touch x."]
    with MockAPI(script) as mock:
        proc = run(tmp_path, "-p", "make x", "--permission-mode", "plan", mock=mock,
                   ANTHROPIC_MODEL="claude-sonnet-4-5")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "The plan: 1. touch x.\n" and not (tmp_path / "x").exists()
    assert mock.requests[0]["body"]["model"] == "claude-sonnet-4-5"
    system = mock.requests[0]["body"]["system"][-1]["text"]
    assert "Permission mode: plan (read-only: explore and answer with a plan" in system
    assert "plan mode, which is read-only" in results_of(mock, 1)[0]["content"]
    assert results_of(mock, 1)[1]["is_error"] is True and not (tmp_path / "a.md").exists()


def test_resume_by_id_and_the_session_id_on_every_stream_json_line(tmp_path, run):
    with MockAPI([reply("Looking.", tool_call("list_files", {})), "Two files."]) as mock:
        proc = run(tmp_path, "-p", "what is here?", "--output-format", "stream-json", mock=mock)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]     # each message as it is added
    assert [e["type"] for e in events] == ["system", "user", "assistant", "user", "assistant", "result"]
    assert events[0]["subtype"] == "init" and "run_command" in events[0]["tools"]
    assert events[2]["message"]["content"][1]["name"] == "list_files"
    assert events[3]["message"]["content"][0]["type"] == "tool_result"
    assert events[-1]["result"] == "Two files." and events[-1]["num_turns"] == 2
    # What was streamed is what was sent: the second request carries the same messages.
    assert [e["message"] for e in events[1:4]] == mock.requests[1]["body"]["messages"]
    [session] = {e["session_id"] for e in events}               # one id on all six lines, the result's too
    assert session and len(events) == 6
    for resumed, flag in enumerate(("-r", "--resume")):
        with MockAPI(["Still two."]) as mock:
            proc = run(tmp_path, flag, session, "-p", "and now?", "--output-format", "json", mock=mock)
        assert proc.returncode == 0, proc.stderr
        assert len(mock.requests[0]["body"]["messages"]) == 5 + 2 * resumed     # what was saved, then the prompt
        assert json.loads(proc.stdout)["session_id"] == session
    with MockAPI() as mock:
        proc = run(tmp_path, "-r", "no-such-id", "-p", "hi", mock=mock)
    assert proc.returncode == 2 and "no saved session with id no-such-id" in proc.stderr and mock.requests == []


def test_result_subtypes_are_claude_codes(tmp_path, run):
    # The other subtypes are asserted in test_headless.py, by the runs that already end so:
    # "success" and "error_during_execution" by the --output-format json tests, and
    # "error_max_budget_usd" by test_max_budget_stops_before_a_request_that_could_pass_it.
    with MockAPI(MockAPI.mode("loop")) as mock:
        proc = run(tmp_path, "-p", "go", "--output-format", "json", "--max-turns", "1", mock=mock)
    result = json.loads(proc.stdout)
    assert (result["subtype"], result["is_error"]) == ("error_max_turns", True), result


def test_plan_mode_ends_with_approving_the_plan_and_switching_mode(tmp_path, kesi_pty):
    script = ["Plan: create made.txt.", reply(tool_call("run_command", {"command": "touch made.txt"})), "Done."]
    with MockAPI(script) as mock:
        with kesi_pty(tmp_path, mock, "--permission-mode", "plan", TERM="dumb") as term:
            term.expect("you > ")
            term.type("make a file\n")
            term.expect("Approve the plan and carry it out? [a = in auto mode / e = acceptEdits / d = default")
            term.type("d\n")
            term.expect("permission mode: default")
            term.expect("Allow? [")                   # default mode asks; the sandbox is off
            term.type("y\n")
            term.expect("Done.")
            term.expect("you > ")
            assert term.leave() == 0, term.seen[-2000:]
    assert (tmp_path / "made.txt").exists()
    assert mock.requests[1]["body"]["messages"][-1]["content"] == "The plan is approved: carry it out."
