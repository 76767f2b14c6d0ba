"""The REPL, headless mode and the agent loop, end to end against the mock API.

The REPL and CLI tests start a real `python kesi.py` child with piped stdin
(or a pseudo-terminal for readline), then read the mock's request log: what
KeSi actually sent is the best evidence of what its journal contains.
"""
import builtins
import io
import subprocess
import sys

import pytest

import checklib
import kesi
from mock_api import MockAPI, error, reply, tool_call
from ptyterm import Terminal

KESI = checklib.ROOT / "kesi.py"


def child_env(mock=None, **extra) -> dict:
    """Environment for a kesi.py child: the mock, no sandbox probe, cached bytecode."""
    return checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off", **extra)


def run_kesi(cwd, *args, mock=None, stdin="", **env):
    """kesi.py as a child process with piped stdin."""
    environment = child_env(mock, **env)
    return subprocess.run([sys.executable, str(KESI), *args], cwd=cwd, input=stdin, env=environment,
                          capture_output=True, text=True, timeout=60)


def sent(mock):
    """The messages list of every request the mock received."""
    return [r["body"]["messages"] for r in mock.requests]


def user_text(message) -> str:
    return kesi.text_of(message["content"])


# --- REPL: what reaches the API (a real child process) --------------------------------

def test_repl_history_grows_one_three_five_and_keeps_blocks(tmp_path):
    with MockAPI(["Hi, Ah-Liong.", "You are Ah-Liong.", "Bye."]) as mock:
        proc = run_kesi(tmp_path, mock=mock, stdin="I am Ah-Liong\n\n   \nWho am I?\nthanks\n")
    assert proc.returncode == 0, proc.stderr
    assert [len(messages) for messages in sent(mock)] == [1, 3, 5]     # blank lines sent nothing
    assert [r["status"] for r in mock.requests] == [200, 200, 200]
    last = sent(mock)[-1]
    assert [m["role"] for m in last] == ["user", "assistant", "user", "assistant", "user"]
    # Replies are stored as the full list of blocks, not as their text.
    assert last[1]["content"] == [{"type": "text", "text": "Hi, Ah-Liong."}]
    assert [user_text(m) for m in last[::2]] == ["I am Ah-Liong", "Who am I?", "thanks"]
    assert "KeSi > You are Ah-Liong." in proc.stdout
    assert "Traceback" not in proc.stderr


# --- REPL behaviour (main() in process) -------------------------------------------------

def test_blank_lines_and_slash_commands_make_no_request(main_in_process):
    with MockAPI() as mock:
        code, out, _ = main_in_process([], "\n   \n\t\n/help\n/cost\n/todo\n/nonsense\n", mock)
    assert code == 0
    assert mock.requests == []
    assert "/reset" in out and "Unknown command /nonsense" in out


def test_reset_sends_a_fresh_one_message_journal(main_in_process):
    with MockAPI(["first answer", "second answer"]) as mock:
        code, out, _ = main_in_process([], "remember 42\n/reset\nwhat did I say?\n", mock)
    assert code == 0
    assert [len(messages) for messages in sent(mock)] == [1, 1]
    assert user_text(sent(mock)[1][0]) == "what did I say?"
    assert "cleared" in out


@pytest.mark.parametrize("command", ["/exit", "/quit"])
def test_exit_and_quit_stop_reading_input(main_in_process, command):
    with MockAPI(["one"]) as mock:
        code, _, _ = main_in_process([], f"first\n{command}\nnever sent\n", mock)
    assert code == 0
    assert len(mock.requests) == 1


def test_end_of_input_ends_the_repl_cleanly(main_in_process):
    with MockAPI(["answer"]) as mock:
        code, out, _ = main_in_process([], "question", mock)     # no newline, then EOF (Ctrl-D)
    assert code == 0
    assert len(mock.requests) == 1 and "KeSi > answer" in out


def test_an_api_error_does_not_end_the_repl(main_in_process):
    with MockAPI([error(400, "prompt is too long: 250000 tokens > 200000 maximum"), "back again"]) as mock:
        code, out, _ = main_in_process([], "first\nsecond\n", mock)
    assert code == 0
    assert "prompt is too long" in out and "KeSi > back again" in out
    assert [r["status"] for r in mock.requests] == [400, 200]


def test_two_tool_calls_get_one_message_with_two_results(main_in_process, ws):
    (ws / "a.txt").write_text("apple\n")
    script = [reply("Reading both.", tool_call("read_file", {"file_path": "a.txt"}),
                    tool_call("read_file", {"file_path": "/etc/passwd"})),
              "a.txt says apple; /etc/passwd is off-limits."]
    with MockAPI(script) as mock:
        code, out, _ = main_in_process([], "compare a.txt and /etc/passwd\n", mock)
    assert code == 0
    assert [r["status"] for r in mock.requests] == [200, 200]
    first_reply, results = sent(mock)[1][1:]
    uses = [b for b in first_reply["content"] if b["type"] == "tool_use"]
    assert [b["type"] for b in first_reply["content"]] == ["text", "tool_use", "tool_use"]
    assert results["role"] == "user"
    assert [(r["type"], r["tool_use_id"], r["is_error"]) for r in results["content"]] == [
        ("tool_result", uses[0]["id"], False), ("tool_result", uses[1]["id"], True)]
    assert "apple" in results["content"][0]["content"]
    assert "root:" not in results["content"][1]["content"]
    assert "[tool] read_file(file_path='a.txt')" in out


# --- model, endpoint, key -------------------------------------------------------------

def test_kesi_model_and_the_model_flag_choose_the_model(main_in_process):
    with MockAPI() as mock:
        main_in_process(["-p", "hi"], mock=mock, KESI_MODEL="claude-sonnet-4-5")
        main_in_process(["-p", "hi", "--model", "claude-opus-4-1"], mock=mock, KESI_MODEL="ignored")
    assert [r["body"]["model"] for r in mock.requests] == ["claude-sonnet-4-5", "claude-opus-4-1"]


def test_missing_key_gives_a_clear_message(tmp_path):
    with MockAPI() as mock:
        env = child_env(mock)
        del env["ANTHROPIC_API_KEY"]
        proc = subprocess.run([sys.executable, str(KESI), "-p", "hi"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "ANTHROPIC_API_KEY" in proc.stderr and ".env" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert mock.requests == []


def test_a_dotenv_file_in_the_project_supplies_the_key(main_in_process, ws):
    (ws / ".env").write_text("# local secrets\nexport ANTHROPIC_API_KEY=\"from-dotenv\"\n")
    with MockAPI(["ok"]) as mock:
        code, out, err = main_in_process(["-p", "hi"], ANTHROPIC_BASE_URL=mock.url)   # no key in env
    assert (code, out) == (0, "ok\n"), err
    headers = mock.requests[0]["headers"]
    assert "from-dotenv" in headers.get("x-api-key", "") + headers.get("authorization", "")


# --- headless mode -----------------------------------------------------------------------

def test_headless_prints_only_the_final_answer(tmp_path):
    (tmp_path / "notes.md").write_text("# Notes\nbuy rice\n")
    script = [reply("Let me look.", tool_call("list_files", {})), "There is one file: notes.md."]
    with MockAPI(script) as mock:
        proc = run_kesi(tmp_path, "-p", "what is here?", mock=mock)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "There is one file: notes.md.\n"
    assert "[tool] list_files()" in proc.stderr       # progress goes to stderr
    assert len(mock.requests) == 2
    # No KESI_MODEL in the child's environment: the default model.
    assert {r["body"]["model"] for r in mock.requests} == {"claude-haiku-4-5"}


def test_headless_reads_the_prompt_from_stdin(main_in_process):
    with MockAPI(["summarised"]) as mock:
        code, out, _ = main_in_process(["-p", "-"], "a long task\nwith two lines\n", mock)
    assert code == 0 and out == "summarised\n"
    assert user_text(sent(mock)[0][0]) == "a long task\nwith two lines"


def test_headless_empty_prompt_is_a_usage_error(main_in_process):
    with MockAPI() as mock:
        code, _, err = main_in_process(["-p", "   "], mock=mock)
    assert code == 2 and "empty" in err
    assert mock.requests == []


def test_headless_api_failure_exits_1_with_a_readable_error(main_in_process):
    with MockAPI(MockAPI.mode("400")) as mock:
        code, out, err = main_in_process(["-p", "hi"], mock=mock)
    assert code == 1 and out == ""
    assert "400" in err and "prompt is too long" in err


def test_headless_unreachable_endpoint_exits_1(main_in_process):
    mock = MockAPI().start()
    url = mock.url
    mock.stop()                                     # nothing listens there any more
    code, out, err = main_in_process(["-p", "hi"], ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="test-key",
                                     KESI_MAX_RETRIES="0")
    assert code == 1
    assert "could not reach the API" in out + err


# --- readline on a real terminal ----------------------------------------------------------

def test_readline_recalls_history_and_ctrl_d_exits(tmp_path):
    pytest.importorskip("readline")
    with MockAPI(["first answer", "second answer"]) as mock:
        term = Terminal([sys.executable, KESI], tmp_path, child_env(mock, TERM="xterm"))
        try:
            term.wait_for(b"you > ")
            term.type(b"hello kesi\r")
            term.wait_for(b"first answer", b"you > ")
            term.type(b"\x1b[A\r")               # arrow up: the previous line again
            term.wait_for(b"first answer", b"second answer", b"you > ")
            term.type(b"\x04")                   # Ctrl-D on an empty line
            assert term.proc.wait(timeout=30) == 0
        finally:
            term.close()
    assert [user_text(m) for m in sent(mock)[1][::2]] == ["hello kesi", "hello kesi"]
    saved = (checklib.records_of(tmp_path) / "prompt-history.jsonl").read_text()
    assert "hello kesi" in saved


# --- the agent loop (in process) --------------------------------------------------------------

def loop(mock_client, script, prompt="go"):
    """Run one task through run_agent; return (answer, mock, history)."""
    mock, client = mock_client(script, max_retries=0)
    history = [{"role": "user", "content": prompt}]
    answer = kesi.run_agent(client, history)
    return answer, mock, history


def results_in(history):
    return [b for m in history if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def test_loop_runs_tools_until_a_text_answer(ws, mock_client):
    (ws / "a.txt").write_text("alpha\n")
    script = [reply(None, tool_call("read_file", {"file_path": "a.txt"})),
              reply("Now the folder.", tool_call("list_files", {})),
              "a.txt holds alpha."]
    answer, mock, history = loop(mock_client, script)
    assert (answer.text, answer.ok) == ("a.txt holds alpha.", True)
    assert [len(m) for m in sent(mock)] == [1, 3, 5]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert all(isinstance(m["content"], list) for m in history[1:])
    assert [r["content"] for r in results_in(history)] == ["     1\talpha", "a.txt"]


@pytest.mark.parametrize("call, expected", [
    (tool_call("delete_everything", {}), "no tool named delete_everything"),
    (tool_call("read_file", {"path": "a.txt"}), "wrong arguments for read_file"),
    (tool_call("read_file", {}), "wrong arguments for read_file"),
    (tool_call("glob", {"pattern": "*", "recursive": True}), "wrong arguments for glob"),
])
def test_unknown_tools_and_bad_arguments_become_error_results(ws, mock_client, call, expected):
    answer, mock, history = loop(mock_client, [reply(None, call), "I will try something else."])
    assert answer.text == "I will try something else."
    [result] = results_in(history)
    assert result["is_error"] is True and expected in result["content"]
    assert [r["status"] for r in mock.requests] == [200, 200]


def test_a_tool_that_raises_becomes_an_error_result(ws, mock_client, monkeypatch):
    def exploding(file_path, offset=None, limit=None):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(kesi.TOOL_FUNCS, "read_file", exploding)   # the loop dispatches via this table
    script = [reply(None, tool_call("read_file", {"file_path": "a.txt"}), tool_call("list_files", {})),
              "Reading failed, listing worked."]
    answer, _, history = loop(mock_client, script)
    assert answer.ok
    failed, listed = results_in(history)
    assert failed["is_error"] and "RuntimeError: disk on fire" in failed["content"]
    assert listed["is_error"] is False


def test_every_tool_use_in_a_reply_is_answered_in_one_message(ws, mock_client):
    (ws / "a.txt").write_text("a\n")
    calls = [tool_call("read_file", {"file_path": "a.txt"}), tool_call("grep", {"pattern": "a"}),
             tool_call("glob", {"pattern": "../*"}), tool_call("nope", {})]
    answer, mock, history = loop(mock_client, [reply("Four at once.", *calls), "done"])
    assert answer.text == "done"
    assert len(sent(mock)[1]) == 3                 # user, assistant, ONE user message of results
    uses = [b["id"] for b in history[1]["content"] if b["type"] == "tool_use"]
    results = history[2]["content"]
    assert [r["tool_use_id"] for r in results] == uses
    assert [r["is_error"] for r in results] == [False, False, True, True]


def test_the_journal_stays_valid_for_the_next_turn(ws, mock_client):
    mock, client = mock_client([reply(None, tool_call("read_file", {"file_path": "missing.txt"})),
                                "It does not exist.", "Second turn answer."], max_retries=0)
    history = [{"role": "user", "content": "read missing.txt"}]
    kesi.run_agent(client, history)
    history.append({"role": "user", "content": "and now?"})
    assert kesi.run_agent(client, history).text == "Second turn answer."
    assert [r["status"] for r in mock.requests] == [200, 200, 200]


# --- multi-line prompts, Ctrl-C at the prompt, slash commands -------------------------------------

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


def test_slash_command_or_path():
    assert not kesi.is_slash_command("/etc/hosts what") and not kesi.is_slash_command("/tmp is full again")  # rt38c 52
    assert kesi.is_slash_command("/cost")


# --- the one-line summary under a tool call -------------------------------------------------------

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


# --- /status, /init and the bell --------------------------------------------------------------

def test_status_init_and_the_bell_after_a_long_turn(tmp_path):
    script = [reply("slow answer", delay=1.2),
              reply(tool_call("write_file", {"file_path": "AGENTS.md", "content": "# Agents\n- test: pytest\n"})),
              reply("Wrote AGENTS.md.")]
    with MockAPI(script) as mock:
        env = child_env(mock, TERM="xterm", NO_COLOR="1", KESI_BELL_AFTER="1")
        with Terminal([sys.executable, KESI, "--permission-mode", "acceptEdits"], tmp_path, env) as term:
            term.expect("you > ")
            term.type("/status\n")
            status = term.expect("you > ")
            term.type("hello\n")
            term.expect("slow answer")
            term.expect("you > ")
            bell_at = term.seen.rfind("\a")
            term.type("/init\n")
            term.expect("Wrote AGENTS.md.")
            term.expect("you > ")
            term.type("/init\n")                   # rt38c 49: once there, KeSi leaves it, whatever the model does
            term.expect("AGENTS.md exists already: /init leaves it as it is")
            term.expect("you > ")
            term.type("/exit\n")
            term.close()
    after_banner = status.split("you > /status", 1)[1]
    assert "sandbox:" in after_banner and "permissions: acceptEdits" in after_banner
    assert term.seen.index("\a") > term.seen.index("slow answer") and bell_at > 0       # the long turn rang
    assert sent(mock)[1][-1]["content"] == kesi.INIT_PROMPT and len(mock.requests) == 3    # none for the second
    assert (tmp_path / "AGENTS.md").read_text().startswith("# Agents")
