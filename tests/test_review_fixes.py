"""Regression tests for the fixes from the latest code review of kesi.py.

Each test drives the real parts: files in a temporary jail, real sh, git
and bwrap processes, a real kesi.py child for the REPL, and the real SDK
against the mock API where a model is involved. Only ask_user (the person
at the terminal), input() and, for the task tool, run_agent are replaced.
"""
import builtins
import io
import os
import subprocess
import sys

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call

KESI = checklib.ROOT / "kesi.py"


def tool_use(use_id, name, tool_input):
    return {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}


# --- 1. backslash-newline is joined as sh joins it --------------------------------

def test_sh_really_joins_backslash_newline_into_one_word():
    # The premise of the fix: "ec\<newline>ho" is the command echo for sh.
    proc = subprocess.run(["sh", "-c", "ec\\\nho joined"], capture_output=True, text=True, timeout=10)
    assert proc.stdout == "joined\n"


@pytest.mark.parametrize("command", ["r\\\nm -rf /", "su\\\ndo id"])
def test_split_dangerous_command_is_denied(ws, command):
    verdict, reason = kesi.classify_command(command)
    assert verdict == "deny", reason


def test_split_secret_name_is_asked_about(ws):
    (ws / ".env").write_text("KEY=1\n")
    assert kesi.classify_command("cat .e\\\nnv")[0] == "ask"
    assert kesi.classify_command("cat README.md")[0] == "allow"    # the control case


def test_split_rm_root_is_refused_even_in_bypass_mode(ws, monkeypatch, user):
    person = user(then="y")          # says yes to any question
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "bypassPermissions")
    allowed, refusal = kesi.check_command_permission("r\\\nm -rf /")
    assert not allowed
    assert "safety rule" in refusal
    assert person.asked == []


# --- 2. one grant key per file, however it is spelled ------------------------------

@pytest.fixture
def jail_with_a(ws):
    (ws / "a.py").write_text("x = 1\n")
    (ws / "sub").mkdir()
    return ws


def spellings(root):
    return ["a.py", str(root / "a.py"), "sub/../a.py"]


def test_write_key_is_the_same_for_every_spelling(jail_with_a):
    assert [kesi.write_key(p) for p in spellings(jail_with_a)] == ["a.py"] * 3


def test_grant_on_a_py_covers_absolute_and_dotdot_spellings(jail_with_a, user):
    person = user(then="y")          # says yes to any question
    kesi.GRANTED_WRITES.add("a.py")
    for path in spellings(jail_with_a):
        assert kesi.check_write_permission("edit_file", path) == (True, None), path
    assert person.asked == []


def test_absolute_and_dotdot_spellings_are_asked_about_without_a_grant(jail_with_a, user):
    person = user(then="y")          # says yes to any question
    for path in spellings(jail_with_a)[1:]:
        assert kesi.check_write_permission("edit_file", path) == (True, None)
    assert person.asked == ["edit_file wants to change a.py"] * 2


def test_read_only_mode_refuses_absolute_edit_without_asking(jail_with_a, user, notices, monkeypatch):
    person = user(then="y")          # says yes to any question
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    kesi.read_file("a.py")
    use = tool_use("e1", "edit_file", {"file_path": str(jail_with_a / "a.py"),
                                       "old_string": "x = 1", "new_string": "x = 2"})
    results, interrupted = kesi.run_tools([use], kesi.MAIN_AGENT)
    assert not interrupted
    assert results[0]["is_error"] and "read-only mode" in results[0]["content"]
    assert person.asked == []
    assert (jail_with_a / "a.py").read_text() == "x = 1\n"


# --- 3. option=value arguments name paths too --------------------------------------

@pytest.mark.parametrize("command", ["diff --from-file=.env README.md", "wc --files0-from=.env"])
def test_option_value_naming_a_secret_is_asked_about(ws, command):
    (ws / ".env").write_text("KEY=1\n")
    (ws / "README.md").write_text("hi\n")
    verdict, reason = kesi.classify_command(command)
    assert verdict == "ask"
    assert "may not read" in reason
    assert kesi.touches_forbidden(command.split())


# --- 4. symlinked secrets are not mounted over --------------------------------------

def test_symlinked_env_files_are_not_masked_and_commands_still_run(ws, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "settings.txt"
    outside.write_text("not a secret\n")
    (ws / "dangling").mkdir()
    (ws / "dangling" / ".env").symlink_to(ws / "no-such-file")
    (ws / "linked").mkdir()
    (ws / "linked" / ".env").symlink_to(outside)
    (ws / ".env").write_text("KEY=1\n")                 # a real secret: still masked

    assert kesi.secret_paths() == [ws / ".env"]
    argv = kesi.bwrap_argv("echo ok")
    assert str(ws / ".env") in argv
    assert not any(".env" in arg and arg != str(ws / ".env") for arg in argv)

    if kesi.sandbox_kind() is None:
        pytest.skip("bubblewrap is not usable here")
    output, is_error = kesi.run_command("echo ok")
    assert (output, is_error) == ("ok\n(exit code 0)", False)
    output, _ = kesi.run_command("cat .env")             # the mask really holds
    assert "KEY=1" not in output


# --- 5. token estimate for CJK text -------------------------------------------------

def test_cjk_text_is_not_underestimated():
    history = [{"role": "user", "content": "字" * 1000}]
    assert kesi.estimate_tokens(history) >= 1000


# --- 6. .env settings: see tests/test_settings.py and tests/test_trust_env.py -------------


# --- 7. no permission question for a tool the agent lacks ---------------------------

def test_sub_agent_write_file_is_refused_without_a_question(ws, mock_client, user, notices):
    person = user(then="y")          # says yes to any question
    call = tool_call("write_file", {"file_path": "x.py", "content": "y = 1\n"})
    mock, client = mock_client([reply(None, call), "done"])
    answer = kesi.run_agent(client, [{"role": "user", "content": "look around"}], kesi.SUB_AGENT)
    assert answer.ok and answer.text == "done"
    result = mock.requests[1]["body"]["messages"][-1]["content"][0]
    assert result["is_error"]
    assert "there is no tool named write_file" in kesi.text_of(result["content"])
    assert person.asked == []
    assert not (ws / "x.py").exists()


# --- 8. partial-view notes ------------------------------------------------------------

def test_read_to_eof_with_a_cut_line_points_to_edit_file(ws):
    (ws / "long.txt").write_text("short\n" + "x" * (kesi.MAX_LINE_CHARS + 500) + "\nend\n")
    output, is_error = kesi.read_file("long.txt")
    assert not is_error
    assert "the file ends at line 3" in output
    assert "edit_file" in output
    assert "offset=" not in output
    assert (ws / "long.txt") not in kesi.READ_VERSIONS


def test_offset_read_to_eof_says_end_of_file(ws):
    (ws / "five.txt").write_text("".join(f"line {n}\n" for n in range(1, 6)))
    output, is_error = kesi.read_file("five.txt", offset=3)
    assert not is_error
    assert "lines 3-5, the end of the file" in output
    assert "offset=" not in output
    assert kesi.READ_VERSIONS == {}


# --- 9. ignored names in any letter case ---------------------------------------------

def test_ignored_names_are_case_insensitive(ws):
    (ws / ".ENV").write_text("KEY=1\n")
    (ws / ".Env").mkdir()
    (ws / "keep.txt").write_text("ok\n")
    (ws / "NODE_MODULES" / "pkg").mkdir(parents=True)
    (ws / "NODE_MODULES" / "pkg" / "index.js").write_text("x\n")

    output, is_error = kesi.read_file(".ENV")
    assert is_error and "off-limits" in output

    listing, _ = kesi.list_files(".")
    assert "keep.txt" in listing
    assert ".Env" not in listing and ".ENV" not in listing

    hits, _ = kesi.glob_files("**/*")
    assert "keep.txt" in hits
    assert "NODE_MODULES" not in hits and "index.js" not in hits


# --- 10. the child's environment ------------------------------------------------------

needs_venv = pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not running in a virtualenv")


def path_entries_inside(env, folder):
    own = os.path.realpath(folder)
    return [p for p in env["PATH"].split(os.pathsep)
            if os.path.realpath(p) == own or os.path.realpath(p).startswith(own + os.sep)]


@needs_venv
def test_own_venv_is_dropped_from_the_child_environment(ws, monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.join(sys.prefix, "bin"), "/usr/bin", "/bin"]))
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    env = kesi.sandbox_environment()
    assert path_entries_inside(env, sys.prefix) == []
    assert "/usr/bin" in env["PATH"].split(os.pathsep)
    assert "VIRTUAL_ENV" not in env
    assert env["PWD"] == str(ws)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command('echo "venv=${VIRTUAL_ENV-unset} pwd=$PWD"')
    assert output.startswith(f"venv=unset pwd={ws}\n")


@needs_venv
def test_no_path_entry_inside_own_venv_survives(ws, monkeypatch):
    entries = [sys.prefix, os.path.join(sys.prefix, "lib", "tools", "bin"), "/usr/bin"]
    monkeypatch.setenv("PATH", os.pathsep.join(entries))
    assert path_entries_inside(kesi.sandbox_environment(), sys.prefix) == []


@needs_venv
def test_a_users_own_venv_is_kept(ws, tmp_path_factory, monkeypatch):
    other = str(tmp_path_factory.mktemp("user-venv"))
    monkeypatch.setenv("VIRTUAL_ENV", other)
    env = kesi.sandbox_environment()
    assert env["VIRTUAL_ENV"] == other
    assert env["PWD"] == str(ws)


# --- 11. multi-line prompts in the REPL (a real child process) ------------------------

def test_repl_joins_continued_lines_and_triple_quote_blocks(tmp_path):
    stdin = 'first\\\nsecond\n"""\nline one\n  line two\n"""\n/exit\n'
    with MockAPI(["ok one", "ok two"]) as mock:
        proc = subprocess.run([sys.executable, str(KESI)], cwd=tmp_path, input=stdin,
                              env=checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off"),
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    prompts = [r["body"]["messages"][-1] for r in mock.requests]
    assert [(m["role"], kesi.text_of(m["content"])) for m in prompts] == [
        ("user", "first\nsecond"), ("user", "line one\n  line two")]


# --- 12. Ctrl-C at the prompt ----------------------------------------------------------

def scripted_input(monkeypatch, actions):
    """builtins.input that raises or returns the next action; returns what is left."""
    left = list(actions)

    def fake_input(prompt=""):
        action = left.pop(0)
        if isinstance(action, type) and issubclass(action, BaseException):
            raise action
        return action

    monkeypatch.setattr(builtins, "input", fake_input)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))     # not a terminal: no readline setup
    return left


def test_one_ctrl_c_at_the_prompt_only_warns(ws, monkeypatch, notices):
    left = scripted_input(monkeypatch, [KeyboardInterrupt, "/exit"])
    assert kesi.repl(None, []) == 0
    assert left == []                                     # it went on to read /exit
    assert "Ctrl-C again" in notices.getvalue()


def test_two_ctrl_c_in_a_row_leave_the_repl(ws, monkeypatch, notices):
    left = scripted_input(monkeypatch, [KeyboardInterrupt, KeyboardInterrupt, "/exit"])
    assert kesi.repl(None, []) == 0
    assert left == ["/exit"]                              # left before reading another line


# --- 13. the one-line summary under a tool call -----------------------------------------

def test_summary_of_a_command_shows_its_last_output_line_and_status():
    output = "a\nb\n1 failed, 6 passed\n(exit code 1)"
    assert kesi.summarize_result("run_command", output, True) == "1 failed, 6 passed  (exit code 1)"


def test_summary_of_a_real_command_run(ws):
    with checklib.sandbox_forced(None):
        output, is_error = kesi.run_command("printf 'x\\n3 passed\\n'; exit 2")
    assert kesi.summarize_result("run_command", output, is_error) == "3 passed  (exit code 2)"


def test_summary_of_reads_todos_and_other_tools(ws, notices):
    (ws / "three.txt").write_text("one\ntwo\nthree\n")
    whole, _ = kesi.read_file("three.txt")
    part, _ = kesi.read_file("three.txt", limit=2)
    assert kesi.summarize_result("read_file", whole, False) == "read 3 lines"
    assert kesi.summarize_result("read_file", part, False) == "read 2 lines (partial view)"
    plan, is_error = kesi.todo_write([{"content": "step", "status": "pending"}])
    assert kesi.summarize_result("todo_write", plan, is_error) is None
    assert kesi.summarize_result("glob", "a.py\nb.py\nc.py", False) == "a.py (+2 lines)"


# --- 14. .kesi stays out of git ---------------------------------------------------------

def test_saved_session_folder_is_invisible_to_git(ws):
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True, timeout=30)
    (ws / "main.py").write_text("print(1)\n")
    kesi.save_session([{"role": "user", "content": "hello"}])
    assert "*" in (ws / ".kesi" / ".gitignore").read_text().splitlines()
    assert list((ws / ".kesi" / "sessions").glob("*.jsonl"))
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ws,
                            capture_output=True, text=True, check=True, timeout=30).stdout
    assert "main.py" in status
    assert ".kesi" not in status


# --- 15. slash commands -------------------------------------------------------------------

def test_clear_resets_like_reset(ws, notices, monkeypatch):
    monkeypatch.setattr(kesi, "SESSION_FILE", ws / "old.jsonl")
    (ws / "a.txt").write_text("a\n")
    kesi.read_file("a.txt")
    kesi.TODOS[:] = [{"content": "step", "status": "pending"}]
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert kesi.handle_slash("/clear", None, history) is True
    assert (history, kesi.READ_VERSIONS, kesi.TODOS, kesi.SESSION_FILE) == ([], {}, [], None)


def test_mode_command_shows_and_rejects(ws, notices, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    kesi.handle_slash("/mode", None, [])
    assert "Current mode: acceptEdits" in notices.getvalue()
    kesi.handle_slash("/mode nonsense", None, [])
    assert "Unknown mode nonsense" in notices.getvalue()
    assert kesi.PERMISSION_MODE == "acceptEdits"


def test_compact_on_empty_history(ws, notices):
    assert kesi.handle_slash("/compact", None, []) is True
    assert "nothing to compact" in notices.getvalue()


def test_slash_command_or_path():
    assert not kesi.is_slash_command("/etc/hosts what")
    assert kesi.is_slash_command("/cost")


# --- 16. Ctrl-C inside a sub-agent stops the whole batch ----------------------------------

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


# --- 17. the plan comes back with the session ---------------------------------------------

def todo_round(use_id, todos):
    return [{"role": "assistant", "content": [tool_use(use_id, "todo_write", {"todos": todos})]},
            {"role": "user", "content": [kesi.tool_result(use_id, "saved", False)]}]


def test_resume_restores_the_last_valid_todo_list(ws, notices):
    first = [{"content": "explore", "status": "in_progress"}]
    later = [{"content": "explore", "status": "completed"}, {"content": "fix", "status": "in_progress"}]
    invalid = [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]
    history = [{"role": "user", "content": "fix the bug"}, *todo_round("t1", first),
               *todo_round("t2", later), *todo_round("t3", invalid),
               {"role": "assistant", "content": "working on it"}]
    kesi.save_session(history)
    saved = kesi.SESSION_FILE
    kesi.reset_session([])
    assert kesi.resume_session(saved, resumed := [])
    assert resumed == history
    assert kesi.TODOS == later


# --- 18. cleared reads no longer license a write -------------------------------------------

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

    assert kesi.clear_old_tool_results(history) == 1
    assert history[2]["content"][0]["content"] == kesi.CLEARED_RESULT
    assert set(kesi.READ_VERSIONS) == {ws / f"f{i}.txt" for i in range(1, count)}
    output, is_error = kesi.write_file("f0.txt", "overwritten from memory\n")
    assert is_error
    assert (ws / "f0.txt").read_text().startswith("file 0 ")


def test_write_file_with_an_absolute_path_is_refused_without_asking(jail_with_a, user):
    """write_file refuses absolute paths, so nobody is asked about one first."""
    person = user(then="y")          # says yes to any question
    path = str(jail_with_a / "a.py")
    assert kesi.check_write_permission("write_file", path) == (True, None)
    assert person.asked == []
    output, is_error = kesi.write_file(path, "x = 2\n")
    assert is_error and "not allowed" in output and (jail_with_a / "a.py").read_text() == "x = 1\n"


def test_the_user_sees_the_diff_before_approving_an_edit(ws, notices, user):
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    person = user("y", "y")
    edit = {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
    assert kesi.judge_call("edit_file", edit, kesi.MAIN_AGENT).outcome == "allow"
    seen = [(q.detail, q.diff) for q in person.questions]
    assert seen[0][0] == "edit_file wants to change calc.py"
    assert "-    return a - b" in seen[0][1] and "+    return a + b" in seen[0][1]
    write = {"file_path": "new.py", "content": "x = 1\n"}
    assert kesi.judge_call("write_file", write, kesi.MAIN_AGENT).outcome == "allow"
    assert (person.questions[1].detail, person.questions[1].diff) == ("write_file wants to create new.py",
                                                                      "@@ -0,0 +1 @@\n+x = 1")


def test_an_edit_that_cannot_apply_is_refused_without_asking(ws, user):
    person = user(then="y")          # says yes to any question
    (ws / "calc.py").write_text("x = 1\n")
    verdict = kesi.judge_call("edit_file", {"file_path": "calc.py", "old_string": "nope", "new_string": "yes"},
                              kesi.MAIN_AGENT)
    assert verdict.outcome == "cannot" and "old_string was not found" in verdict.message and person.asked == []
    assert (ws / "calc.py").read_text() == "x = 1\n"


def test_the_real_prompt_prints_the_preview(ws, notices, monkeypatch):
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    question = kesi.Question("edit_file wants to change a.py", diff="-old\n+new", choices=kesi.FILE_CHOICES)
    assert kesi.ask_user(question) == (False, False)
    assert "        -old\n        +new\n" in notices.getvalue()


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


def test_a_call_that_cannot_apply_is_shown_as_an_error_not_as_blocked(ws, user, notices):
    person = user(then="y")          # says yes to any question
    (ws / "calc.py").write_text("x = 1\n")
    use = tool_use("e9", "edit_file", {"file_path": "calc.py", "old_string": "nope", "new_string": "yes"})
    results, _ = kesi.run_tools([use], kesi.MAIN_AGENT)
    assert results[0]["is_error"] and "old_string was not found" in results[0]["content"]
    assert "x Error: old_string was not found" in notices.getvalue() and "[blocked]" not in notices.getvalue()
    assert person.asked == []
