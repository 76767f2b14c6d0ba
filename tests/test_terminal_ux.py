"""The terminal experience, through a real pseudo-terminal against the mock:
a paste is one prompt (bracketed paste), Ctrl-D inside a multi-line prompt
ends that prompt instead of KeSi, at the turn limit the person is asked
whether the task may go on, answers wrap to the window and show light
Markdown, Tab completes, and a running command or Ctrl-C is shown as it happens.

The pty is conftest.py's kesi_pty: a session of its own with the pty as
controlling terminal (Ctrl-C is a real SIGINT) and a wide window.
"""
import re
import subprocess
import sys
import threading

import kesi
from checklib import kesi_subprocess_env, unique_sleep
from mock_api import error, reply, tool_call
from test_permissions import KESI


def prompts_sent(mock) -> list[str]:
    """The last user message of every request, as text."""
    return [kesi.text_of(r["body"]["messages"][-1]["content"]) for r in mock.requests]


def leave(term):
    assert term.leave() == 0, term.seen[-2000:]


# --- paste ----------------------------------------------------------------------------

def test_a_bracketed_paste_is_one_prompt_and_blocks_and_continuations_still_work(ws, mock_client, kesi_pty):
    mock, _ = mock_client(["pasted", "block", "continued"])
    with kesi_pty(ws, mock, TERM="xterm") as term:
        term.expect("\x1b[?2004h")            # KeSi asks the terminal to mark pastes
        term.expect("you > ")
        # What a terminal sends for a pasted three-line stack trace, then Enter.
        term.type("\x1b[200~Traceback (most recent call last):\n  File \"app.py\", line 3\n"
                  "ZeroDivisionError: division by zero\x1b[201~")
        term.type("\r")
        term.expect("KeSi > pasted")
        term.expect("you > ")
        term.type('"""\rfirst\r  second\r"""\r')
        term.expect("KeSi > block")
        term.expect("you > ")
        term.type("one \\\rtwo\r")
        term.expect("KeSi > continued")
        term.expect("you > ")
        leave(term)
    assert prompts_sent(mock) == ['Traceback (most recent call last):\n  File "app.py", line 3\n'
                                  "ZeroDivisionError: division by zero", "first\n  second", "one \ntwo"]


# --- Ctrl-D inside a multi-line prompt, on a dumb terminal -------------------------------------

def test_ctrl_d_inside_a_block_ends_the_block_and_keeps_kesi_running(ws, mock_client, kesi_pty):
    mock, _ = mock_client(["got the block", "got the line", "still here"])
    with kesi_pty(ws, mock, TERM="dumb") as term:
        term.expect("you > ")
        term.type('"""\nfirst line\nsecond line\n\x04')
        term.expect("(Ctrl-D: end of the prompt)")
        term.expect("KeSi > got the block")
        term.expect("you > ")
        term.type("half a line \\\n\x04")         # Ctrl-D after a continuation too
        term.expect("KeSi > got the line")
        term.expect("you > ")
        term.type("are you there?\n")
        term.expect("KeSi > still here")
        term.expect("you > ")
        leave(term)
    assert prompts_sent(mock) == ["first line\nsecond line", "half a line", "are you there?"]
    assert "\x1b" not in term.seen           # a dumb terminal is not sent the paste escape, nor any other


# --- the turn limit -----------------------------------------------------------------------

def test_at_the_turn_limit_the_repl_offers_to_go_on(ws, mock_client, kesi_pty):
    step = reply(tool_call("list_files", {}))
    mock, _ = mock_client([step, step, step, "finished after three steps",     # task 1: "y"
                           step, step,                                           # task 2: "n"
                           "the journal is still valid"])
    with kesi_pty(ws, mock, TERM="dumb", KESI_MAX_TURNS="2") as term:
        term.expect("you > ")
        term.type("a long task\n")
        term.expect("the limit is KESI_MAX_TURNS=2")
        term.expect("Go on for 2 more? [y/N] ")
        term.type("y\n")
        term.expect("KeSi > finished after three steps")
        term.expect("you > ")
        term.type("another long task\n")
        term.expect("Go on for 2 more? [y/N] ")
        term.type("n\n")
        stopped = term.expect("you > ")
        assert "stopped after 2 model round trips" in stopped and "Set KESI_MAX_TURNS" in stopped
        term.type("thanks\n")
        term.expect("KeSi > the journal is still valid")
        term.expect("you > ")
        leave(term)
    assert [r["status"] for r in mock.requests] == [200] * 7


# --- a first prompt on the command line, /context ----------------------------------------------

def test_a_prompt_argument_starts_the_repl_with_it_and_context_shows_the_window(ws, mock_client, kesi_pty):
    mock, _ = mock_client(["hello from the first turn"])
    with kesi_pty(ws, mock, "say", "hello", TERM="dumb", KESI_CONTEXT_WINDOW="100000") as term:
        term.expect("you > say hello")
        term.expect("KeSi > hello from the first turn")
        term.expect("you > ")
        term.type("/context\n")
        shown = term.expect("you > ")
        leave(term)
    assert prompts_sent(mock) == ["say hello"]
    assert "of 100,000 tokens (" in shown and "compacted at 80%" in shown
    assert "2 messages; permission mode: default" in shown


# --- colour and the waiting spinner -----------------------------------------------------------

SGR = re.compile(r"\x1b\[[0-9;]*m")


def refuse_the_write(term):
    """At the first prompt, ask for write_script()'s write and refuse it."""
    term.expect("you > ")
    term.type("write it\n")
    term.expect("Allow? [")
    term.type("n\n")
    term.expect("KeSi > not written")
    term.expect("you > ")


def write_script():
    return [reply(tool_call("write_file", {"file_path": "new.txt", "content": "hello\n"})), "not written"]


def test_tool_lines_diffs_refusals_and_markdown_are_coloured_on_a_terminal(ws, mock_client, kesi_pty):
    from test_terminal_safety import ERASE, OSC52
    mock, _ = mock_client(write_script() + [f"# Steps\nRun **the tests** with `pytest -q {ERASE}` first.\n"
                                            f"```\ndef f(**kwargs):  # {OSC52}\n```\ndone"])
    with kesi_pty(ws, mock, TERM="xterm") as term:
        refuse_the_write(term)
        term.type("how?\n")
        term.expect("done")
        term.expect("you > ")
        leave(term)
    seen = term.seen
    assert "\x1b[36m  [tool] write_file(file_path='new.txt', content='hello\\n')\x1b[0m" in seen
    assert "\x1b[32m        +hello\x1b[0m" in seen
    assert "\x1b[31m      [blocked] refused; not changed\x1b[0m" in seen
    # Markdown is drawn after the text is made safe
    assert "\x1b[1mSteps" in seen and "# Steps" not in seen                    # a heading, marks dropped
    assert "\x1b[1mthe tests\x1b[0m" in seen and "**the" not in seen
    assert "\x1b[33mpytest -q \\x1b[2K\\x1b[1A\x1b[0m first." in seen        # a code span, shown escaped
    assert "\ndef f(**kwargs):  # \\x1b]52;c;UFdORUQ=\\x07\r\n" in seen     # a code block, verbatim
    assert ERASE not in seen and OSC52 not in seen                            # nothing obeyed


def test_no_color_turns_colour_off(ws, mock_client, kesi_pty):
    mock, _ = mock_client(write_script())
    with kesi_pty(ws, mock, TERM="xterm", NO_COLOR="1") as term:
        refuse_the_write(term)
        leave(term)
    seen = term.seen
    assert "[tool] write_file(" in seen and "+hello" in seen and "[blocked] refused" in seen
    assert SGR.findall(seen) == []


def test_the_waiting_note_counts_seconds_a_retry_counts_down_and_ctrl_c_says_stopping(ws, mock_client, kesi_pty):
    """Three waits at one xterm: the model thinking, a retry, and Ctrl-C while the model thinks."""
    seen_a_second, released = threading.Event(), threading.Event()

    def slow_reply(body):
        seen_a_second.wait(60)             # the model "thinks" until the test saw the count
        return reply("here at last")

    def slower_reply(body):
        released.wait(60)
        return reply("too late")

    mock, _ = mock_client([slow_reply, error(429, "Number of request tokens has exceeded your rate limit (mock)",
                                             headers={"retry-after": "1"}), reply("after the wait"), slower_reply])
    with kesi_pty(ws, mock, TERM="xterm") as term:
        try:
            term.expect("you > ")
            term.type("think hard\n")
            term.expect("(thinking... 1 s)")
            seen_a_second.set()
            term.expect("KeSi > here at last")
            term.expect("you > ")
            # a retry wait is counted down
            term.type("go\n")
            term.expect("retrying in 1 s")
            term.expect("KeSi > after the wait")
            term.expect("you > ")
            assert [r["status"] for r in mock.requests[1:]] == [429, 200]
            # Ctrl-C while the model thinks says "stopping" at once
            term.type("think\n")
            term.expect("(thinking... 1 s)")
            term.type("\x03")
            term.expect("(stopping...)")
            term.expect("(this turn was interrupted")
            term.expect("you > ")
            leave(term)
        finally:
            seen_a_second.set(), released.set()     # free the mock's reply threads, even after a failure
    before_answer = term.seen.split("think hard")[1].split("KeSi > here at last")[0]
    assert before_answer.rstrip().endswith("\r\x1b[K")      # the note is erased before the answer


# --- !command and @path ------------------------------------------------------------------------

def test_bang_runs_a_command_for_the_next_prompt_and_at_path_attaches_a_file_through_the_jail(
        ws, mock_client, kesi_pty):
    (ws / "notes.md").write_text("buy rice\n")
    (ws / ".env").write_text("SECRET=hunter2\n")
    mock, _ = mock_client(["I see the output", "noted"])
    with kesi_pty(ws, mock, TERM="dumb") as term:
        term.expect("you > ")
        term.type("!echo from-the-shell > made.txt; cat made.txt\n")
        term.expect("(this output goes to KeSi with your next message)")
        term.expect("you > ")
        term.type("!sudo id\n")
        term.expect("[blocked] sudo")
        term.expect("you > ")
        assert mock.requests == []                  # a !command is not a model request
        term.type("what did it print?\n")
        term.expect("KeSi > I see the output")
        term.expect("you > ")
        term.type("summarise @notes.md, and @.env and @/etc/passwd too\n")
        term.expect("(attached notes.md)")
        term.expect("(@.env not attached")
        term.expect("(@/etc/passwd not attached")
        term.expect("KeSi > noted")
        term.expect("you > ")
        leave(term)
    assert (ws / "made.txt").read_text() == "from-the-shell\n"
    prompt, attached = prompts_sent(mock)
    assert prompt.startswith("I ran this command myself:\n$ echo from-the-shell > made.txt; cat made.txt\n")
    assert "from-the-shell\n" in prompt and "sudo" not in prompt
    assert prompt.endswith("\n\nwhat did it print?")
    assert attached.startswith("summarise @notes.md, and @.env and @/etc/passwd too\n\nContents of notes.md")
    assert "buy rice" in attached and "hunter2" not in attached and "root:" not in attached


# --- word wrap and light Markdown -------------------------------------------------------------

CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
CODE_LINE = "print('a line of code that is much longer than forty columns, kept whole')"
URL = "https://example.com/a/very/long/url/that/cannot/be/broken/anywhere/at/all"
LONG_ANSWER = ("This sentence has quite a few words that must wrap neatly at forty columns, none of them "
               "broken.\n\n- a list item that is long enough to wrap around the edge\n\n"
               f"```python\n{CODE_LINE}\n```\nSee {URL} for more.")


def answer_lines(seen: str) -> list[str]:
    """The first answer as the screen shows it: from "KeSi > " to the cost line."""
    lines = screen_lines(seen)
    start = next(i for i, line in enumerate(lines) if line.startswith("KeSi > "))
    end = next(i for i, line in enumerate(lines) if line.startswith("  (this turn:"))
    return lines[start:end]


def screen_lines(seen: str) -> list[str]:
    text = CONTROL.sub("", seen).replace("\r\n", "\n")
    return [line.rsplit("\r", 1)[-1] for line in text.split("\n")]


CHINESE = ("這是一段很長的中文回答，沒有任何空格，所以必須在字與字之間換行，而不是超出視窗。"
           "測試 pytest 也通過了，一共七個。")


def test_answers_and_kesis_notes_are_wrapped_to_the_terminal_width_at_spaces_or_between_characters(
        ws, mock_client, kesi_pty):
    mock, _ = mock_client([LONG_ANSWER, error(400, "this request was rejected by the mock for a reason "
                                                   "long enough to need three lines"), CHINESE])
    with kesi_pty(ws, mock, columns=40, TERM="xterm", NO_COLOR="1") as term:
        term.expect("you > ")
        term.type("explain\n")
        term.expect("for more.")
        after_answer = term.expect("you > ")
        term.type("again\n")
        term.expect("/compact")
        after_error = term.expect("you > ")
        term.type("說明\n")
        term.expect("一共七個。")
        term.expect("you > ")
        leave(term)
    notes = screen_lines(term.seen[len(after_answer) - 200:len(after_error)])      # the cost line, the error
    notes = notes[next(i for i, line in enumerate(notes) if "(this turn:" in line):]
    assert [line for line in notes if len(line) > 40] == [] and any("three lines" in line for line in notes)
    assert any(line.startswith("KeSi > Error: the request") for line in notes)
    lines = answer_lines(term.seen)
    assert " ".join(lines).split() == ("KeSi > " + LONG_ANSWER).split()      # no word broken or lost
    assert [line for line in lines if len(line) > 40] == [CODE_LINE, URL]   # code and a URL stay whole
    item = lines.index("- a list item that is long enough to")
    assert lines[item + 1] == "  wrap around the edge"                     # a list item hangs
    assert SGR.findall(term.seen) == []
    # Chinese wraps between characters, and no line starts with a comma
    lines = answer_lines(term.seen[len(after_error):])
    assert len(lines) >= 3 and all(kesi.display_width(line) <= 40 for line in lines)
    assert not any(line.startswith(("，", "。")) for line in lines)
    assert "".join("".join(lines).split()) == "".join(("KeSi > " + CHINESE).split())


def test_a_pipe_gets_the_answer_unwrapped_and_unstyled_and_no_status_lines(ws, mock_client):
    mock, _ = mock_client([reply(tool_call("run_command", {"command": "echo piped-mark"})), LONG_ANSWER])
    proc = subprocess.run([sys.executable, KESI, "--permission-mode", "bypassPermissions"], cwd=ws,
                          input="explain\n", capture_output=True, text=True, timeout=120,
                          env=kesi_subprocess_env(mock, KESI_SANDBOX="off", TERM="xterm", COLUMNS="40"))
    assert proc.returncode == 0, proc.stderr
    assert "KeSi > " + LONG_ANSWER + "\n" in proc.stdout and "\x1b" not in proc.stdout
    assert "> piped-mark  (exit code 0)" in proc.stdout
    assert "running..." not in proc.stdout and "thinking..." not in proc.stdout


# --- Tab completion ------------------------------------------------------------------------

def test_tab_completes_slash_commands_and_at_paths_inside_the_jail_only(tmp_path, mock_client, kesi_pty):
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "main.py").write_text("print('hi')\n")
    (project / "notes.md").write_text("buy rice\n")
    (project / ".gitignore").write_text("build/\n")
    (project / ".env").write_text("SECRET=hunter2\n")
    (project / ".git").mkdir()
    (tmp_path / "outside.txt").write_text("not yours\n")
    mock, _ = mock_client(["read them", "checked"])
    with kesi_pty(project, mock, TERM="xterm") as term:
        term.expect("you > ")
        term.type("/he\t\n")
        term.expect("/compact [focus]")                  # /help ran
        term.expect("you > ")
        term.type("read @no\tand @sr\tma\tplease\n")
        term.expect("KeSi > read them")
        term.expect("you > ")
        term.type("check @.gi\t@.e\t @/et\t @../ou\t\n")
        term.expect("KeSi > checked")
        term.expect("you > ")
        leave(term)
    first, second = prompts_sent(mock)
    assert first.startswith("read @notes.md and @src/main.py please\n\nContents of notes.md")
    assert "print('hi')" in first
    assert second.startswith("check @.gitignore @.e @/et @../ou\n\nContents of .gitignore")   # nothing else completed
    assert "hunter2" not in second and "not yours" not in second


# --- a running command, and Ctrl-C ---------------------------------------------------------

def test_a_running_command_shows_its_seconds_and_ctrl_c_says_stopping_at_once(ws, mock_client, kesi_pty):
    mock, _ = mock_client([reply(tool_call("run_command", {"command": unique_sleep(120)})), "never asked"])
    with kesi_pty(ws, mock, "--permission-mode", "bypassPermissions", TERM="xterm") as term:
        term.expect("you > ")
        term.type("wait a while\n")
        term.expect("(running... 1 s)")
        term.type("\x03")
        term.expect("(stopping...)")
        term.expect("x interrupted; the turn ends")
        term.expect("you > ")
        leave(term)
    assert len(mock.requests) == 1
    ran = term.seen.split("wait a while")[1].split("(stopping...)")[0]
    assert ran.endswith("\r\x1b[K\r      ")             # the status line is erased, then "stopping" replaces it


def test_path_completion_offers_what_list_files_may_show_and_no_more(ws):
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("")
    (ws / "secrets").symlink_to("/etc")                  # a link leading out of the workspace
    (ws / "source").symlink_to("src")                    # a link that stays inside
    (ws / ".env.local").write_text("SECRET=1\n")
    (ws / "evil\x1b[2K.txt").write_text("")              # a name a terminal would obey
    (ws / "my notes.txt").write_text("")                 # @my would end at the space
    assert kesi.path_completions("s") == ["@source/", "@src/"]
    assert kesi.path_completions("src/") == ["@src/main.py "]
    assert kesi.path_completions("secrets/") == [] and kesi.path_completions("../") == []
    assert kesi.path_completions(".env") == [] and kesi.path_completions("ev") == []
    assert kesi.path_completions("my") == []
    assert kesi.completions("/re", "") == ["/revoke ", "/resume ", "/rewind ", "/reset "]
    assert kesi.completions("/re", "see ") == []          # a path in a sentence, not a command


# --- the whole diff at the question -----------------------------------------------------------

def test_d_at_a_real_prompt_prints_the_whole_diff_then_asks_again(ws, mock_client, kesi_pty):
    content = "".join(f"line {i}\n" for i in range(80))
    mock, _ = mock_client([reply(tool_call("write_file", {"file_path": "long.txt", "content": content})),
                           "not written"])
    with kesi_pty(ws, mock, TERM="dumb") as term:
        term.expect("you > ")
        term.type("write it\n")
        before = term.expect("d = the whole diff")
        term.type("d\n")
        term.expect("Allow? [")
        whole = term.seen[len(before):]
        term.type("n\n")
        term.expect("KeSi > not written")
        term.expect("you > ")
        leave(term)
    assert "+line 28" in before and "+line 29" not in before and "(51 more diff lines: answer d" in before
    assert "+line 0" in whole and "+line 79" in whole
    assert not (ws / "long.txt").exists()


def test_path_completion_hides_git_dirs_known_by_what_they_hold_as_list_files_does(ws):
    """rt24 63: a folder holding objects/ and refs/ (a git dir under another name) was offered after @, though
    list_files hides it."""
    for folder in ("bare/objects", "bare/refs", "src/vendor.git/objects", "src/vendor.git/refs", "src/lib", "wt"):
        (ws / folder).mkdir(parents=True)
    (ws / "wt" / "commondir").write_text("../bare\n")        # a worktree's git dir
    (ws / "link").symlink_to("bare")
    assert kesi.path_completions("") == ["@src/"] == ["@" + name for name in kesi.list_files(".")[0].split()]
    assert kesi.path_completions("src/") == ["@src/lib/"]
    assert kesi.path_completions("b") == [] and kesi.path_completions("bare/") == []
