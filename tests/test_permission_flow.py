"""What happens around one permission question: calls that cannot succeed
are refused unasked, the person reads short lines while the model gets the
instruction, the whole command and the whole diff can be seen, files that
other tools run later always ask, and Ctrl-C at the prompt ends the turn
(checked through a real pseudo-terminal against the mock API)."""
import builtins
import io
import sys

import pytest

import kesi
from checklib import kesi_subprocess_env, tool_use
from mock_api import reply, tool_call
from ptyterm import Terminal
from test_permissions import KESI


def use(name, tool_input, use_id="t1"):
    return {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}


# --- calls that cannot succeed are not asked about -----------------------------------

@pytest.mark.parametrize("path, content, why", [
    ("seen.txt", "new\n", "Read it in full"),            # exists, never read
    (".env", "KEY=x\n", "off-limits"),
    ("config/.ENV.local", "KEY=x\n", "off-limits"),
    ("../outside.txt", "x\n", "not allowed"),
    ("/etc/hosts", "x\n", "not allowed"),
])
def test_write_file_that_would_fail_is_refused_unasked(ws, user, notices, path, content, why):
    (ws / "seen.txt").write_text("old\n")
    asked = user("y")
    results, interrupted = kesi.run_tools([use("write_file", {"file_path": path, "content": content})])
    assert results[0]["is_error"] and why in results[0]["content"] and not interrupted
    assert asked.questions == [] and (ws / "seen.txt").read_text() == "old\n"


def test_write_file_over_a_file_changed_since_it_was_read_is_refused_unasked(ws, user, notices):
    (ws / "a.txt").write_text("one\n")
    kesi.read_file("a.txt")
    (ws / "a.txt").write_text("two\n")
    asked = user("y")
    results, _ = kesi.run_tools([use("write_file", {"file_path": "a.txt", "content": "three\n"})])
    assert "changed after you read it" in results[0]["content"] and asked.questions == []
    assert (ws / "a.txt").read_text() == "two\n"


def test_write_file_over_a_read_file_asks_with_its_diff_and_writes(ws, user, notices):
    (ws / "a.txt").write_text("one\n")
    kesi.read_file("a.txt")
    asked = user("y")
    results, _ = kesi.run_tools([use("write_file", {"file_path": "a.txt", "content": "two\n"})])
    assert not results[0]["is_error"] and (ws / "a.txt").read_text() == "two\n"
    assert asked.questions[0].detail == "write_file wants to change a.txt"
    assert "-one" in asked.questions[0].diff and "+two" in asked.questions[0].diff


# --- the person reads a short line; the model gets the instruction ---------------------

def test_refusals_show_a_short_line_and_send_the_instruction(ws, user, notices):
    user("n")
    results, _ = kesi.run_tools([use("run_command", {"command": "pytest -q"}, "t1"),
                                 use("run_command", {"command": "sudo id"}, "t2")])
    assert results[0]["content"] == kesi.USER_REFUSED and "Do not retry" in results[0]["content"]
    assert "blocked by a safety rule" in results[1]["content"]
    shown = notices.getvalue()
    assert "[blocked] refused; not run" in shown and "[blocked] safety rule: sudo would run" in shown
    assert "Do not retry" not in shown and "Error:" not in shown


# --- the prompt shows everything, escaped -------------------------------------------------

def real_prompt(monkeypatch, typed):
    class Tty(io.StringIO):
        def isatty(self):
            return True
    monkeypatch.setattr(sys, "stdin", Tty())
    answers = list(typed)
    monkeypatch.setattr(builtins, "input", lambda prompt="": answers.pop(0))
    return answers


def test_the_prompt_shows_the_whole_command_with_control_characters_escaped(ws, notices, monkeypatch):
    command = "python -c 'print(1)' " + " ".join(f"arg{i}" for i in range(60)) + " \r\x1b[2Kdone"
    real_prompt(monkeypatch, ["n"])
    assert kesi.check_permission("run_command", {"command": command}) == (False, kesi.USER_REFUSED)
    shown = notices.getvalue()
    assert "arg59 \\r\\x1b[2Kdone" in shown and "\r" not in shown and "\x1b" not in shown
    assert "control characters (\\r \\x1b)" in shown


def test_d_shows_the_whole_diff_then_asks_again(ws, notices, monkeypatch):
    old = "".join(f"line {i}\n" for i in range(80))
    (ws / "big.txt").write_text(old)
    kesi.read_file("big.txt")
    left = real_prompt(monkeypatch, ["d", "y"])
    results, _ = kesi.run_tools([use("write_file", {"file_path": "big.txt", "content": old.replace("line", "LINE")})])
    assert not results[0]["is_error"] and not left
    shown = notices.getvalue()
    assert "more diff lines: answer d to see it all" in shown and "d = the whole diff" in shown
    assert "+LINE 79" in shown and shown.count("Allow? [") == 2


# --- files that run later, outside the sandbox ---------------------------------------------

LATER = [".envrc", "sub/.envrc", ".vscode/tasks.json", ".VSCode/settings.json", ".vscode/launch.json",
         ".husky/pre-commit", ".github/workflows/ci.yml", ".GitHub/Workflows/x.yaml", ".idea/workspace.xml",
         ".devcontainer/devcontainer.json", ".pre-commit-config.yaml", "lefthook.yml", ".claude/settings.json",
         ".mcp.json", "mise.toml", "pkg/.vscode/tasks.json"]


@pytest.mark.parametrize("path", LATER)
def test_files_that_run_later_ask_even_in_accept_edits(ws, user, notices, monkeypatch, path):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    asked = user("n")
    results, _ = kesi.run_tools([use("write_file", {"file_path": path, "content": "echo planted\n"})])
    assert results[0]["content"] == kesi.USER_REFUSED and not (ws / path).exists()
    assert asked.questions[0].reason == kesi.RUNS_LATER_REASON


def test_files_that_run_later_follow_the_path_the_tool_writes(ws, user, notices, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    (ws / "editor").mkdir()
    (ws / "cfg").symlink_to(ws / ".vscode", target_is_directory=True)
    (ws / ".vscode").mkdir()
    (ws / ".envrc").write_text("export A=1\n")
    asked = user("n", "n")
    kesi.run_tools([use("write_file", {"file_path": "cfg/tasks.json", "content": "{}"}),
                    use("edit_file", {"file_path": str(ws / "editor/../.envrc"), "old_string": "A=1",
                                      "new_string": "A=2"}, "t2")])
    assert [q.detail for q in asked.questions] == ["write_file wants to create .vscode/tasks.json",
                                                   "edit_file wants to change .envrc"]
    assert not (ws / ".vscode" / "tasks.json").exists() and (ws / ".envrc").read_text() == "export A=1\n"


def test_ordinary_files_and_bypass_do_not_ask(ws, user, notices, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    asked = user()
    kesi.run_tools([use("write_file", {"file_path": "Makefile", "content": "all:\n"}),
                    use("write_file", {"file_path": "src/envrc.py", "content": "x = 1\n"}, "t2")])
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "bypassPermissions")
    kesi.run_tools([use("write_file", {"file_path": ".envrc", "content": "x"}, "t3")])
    assert asked.questions == [] and (ws / "Makefile").exists() and (ws / ".envrc").exists()
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    results, _ = kesi.run_tools([use("write_file", {"file_path": ".vscode/tasks.json", "content": "{}"}, "t4")])
    assert "read-only mode" in results[0]["content"] and asked.questions == []


# --- Ctrl-C at the prompt ends the turn (a real terminal) ------------------------------------

def test_ctrl_c_at_the_prompt_ends_the_turn(ws, mock_client):
    (ws / "notes.txt").write_text("notes\n")
    batch = reply("Testing, then reading.", tool_call("run_command", {"command": "touch made.txt"}),
                  tool_call("read_file", {"file_path": "notes.txt"}))
    mock, _ = mock_client([batch, reply("this reply must not be asked for in turn 1"), reply("second turn")])
    with Terminal([sys.executable, KESI], ws, kesi_subprocess_env(mock, TERM="dumb")) as term:
        term.expect("you > ")
        term.type("run the tests\n")
        term.expect("Allow? [")
        term.wait_until_reading()
        term.type("\x03")
        try:
            term.expect("interrupted", timeout=5)
        except AssertionError:
            # Python's input() loses a SIGINT that lands after readline drew the
            # prompt but before it waits for a key; the next one delivers it.
            term.type("\x03")
            term.expect("interrupted")
        term.expect("you > ")
        assert len(mock.requests) == 1                 # no further request in that turn
        term.type("what happened?\n")
        term.expect("KeSi > this reply must not be asked for in turn 1")
        term.expect("you > ")
        term.type("/exit\n")
        term.close()
    assert not (ws / "made.txt").exists()
    sent = mock.requests[1]["body"]["messages"]
    results = next(m["content"] for m in sent if m["role"] == "user" and isinstance(m["content"], list)
                   and m["content"] and m["content"][0].get("type") == "tool_result")
    assert [r["content"] for r in results] == [kesi.INTERRUPTED_PROMPT, kesi.SKIPPED_TOOL]
    assert "Error:" not in term.seen.split("Allow? [")[1].split("you > ")[0]


# --- more calls that cannot succeed, and the preview a question shows -----------------------------

def test_write_file_with_an_absolute_path_is_refused_without_asking(ws, user):
    """write_file refuses absolute paths, so nobody is asked about one first."""
    (ws / "a.py").write_text("x = 1\n")
    person = user(then="y")          # says yes to any question
    path = str(ws / "a.py")
    assert kesi.check_write_permission("write_file", path) == (True, None)
    assert person.asked == []
    output, is_error = kesi.write_file(path, "x = 2\n")
    assert is_error and "not allowed" in output and (ws / "a.py").read_text() == "x = 1\n"


def test_an_edit_that_cannot_apply_is_refused_without_asking(ws, user):
    person = user(then="y")          # says yes to any question
    (ws / "calc.py").write_text("x = 1\n")
    verdict = kesi.judge_call("edit_file", {"file_path": "calc.py", "old_string": "nope", "new_string": "yes"},
                              kesi.MAIN_AGENT)
    assert verdict.outcome == "cannot" and "old_string was not found" in verdict.message and person.asked == []
    assert (ws / "calc.py").read_text() == "x = 1\n"


def test_a_call_that_cannot_apply_is_shown_as_an_error_not_as_blocked(ws, user, notices):
    person = user(then="y")          # says yes to any question
    (ws / "calc.py").write_text("x = 1\n")
    use = tool_use("e9", "edit_file", {"file_path": "calc.py", "old_string": "nope", "new_string": "yes"})
    results, _ = kesi.run_tools([use], kesi.MAIN_AGENT)
    assert results[0]["is_error"] and "old_string was not found" in results[0]["content"]
    assert "x Error: old_string was not found" in notices.getvalue() and "[blocked]" not in notices.getvalue()
    assert person.asked == []


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


def test_the_real_prompt_prints_the_preview(ws, notices, monkeypatch):
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    question = kesi.Question("edit_file wants to change a.py", diff="-old\n+new", always="Edit(a.py)")
    assert kesi.ask_user(question) == (False, "")
    assert "        -old\n        +new\n" in notices.getvalue()


def test_a_line_padded_to_the_width_cannot_draw_a_question_and_d_shows_long_lines_whole(ws, notices, monkeypatch):
    """rt25m: a command padded with spaces wrapped on the terminal into a fake "[permission needed]" line; a long
    line of a diff (an .envrc write) was cut at 400 characters, and d was not offered."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 80)
    fake = "[permission needed] run command: python3 -m pytest -q"
    kesi.ask_user(kesi.Question("rm -rf src #" + " " * 200 + fake))
    lines = notices.getvalue().splitlines()
    assert all(kesi.display_width(line) <= 80 for line in lines) and not [x for x in lines if x.startswith(fake)]
    (ws / "notes.txt").write_text("short\n")
    kesi.read_file("notes.txt")
    left = real_prompt(monkeypatch, ["d", "n"])
    hidden = "echo ok" + " " * 500 + "; cp -r ~/.ssh /tmp/x"
    kesi.run_tools([use("write_file", {"file_path": "notes.txt", "content": hidden + "\n"})])
    shown = notices.getvalue()
    assert not left and "lines cut at 400 characters: answer d to see it all" in shown
    assert "cp -r ~/.ssh /tmp/x" in shown.replace("\n        | ", "")


SH_LINE_BREAKLESS = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]   # one sh line each


@pytest.mark.parametrize("char", SH_LINE_BREAKLESS)
def test_a_character_sh_reads_within_a_line_never_breaks_a_diff_line(ws, notices, monkeypatch, char):
    """rt37c 4: `export FOO=1<VT># the rest is a comment; touch PWNED` in an .envrc was shown as two added lines,
    the second a comment to the eye; bash sources it as one line and runs touch. The diff splits at \n only."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 200)
    real_prompt(monkeypatch, ["n"])
    content = f"export FOO=1{char}# the rest is a comment; touch PWNED\n"
    kesi.run_tools([use("write_file", {"file_path": ".envrc", "content": content})])
    shown = notices.getvalue()
    escaped = ascii(char)[1:-1]
    assert f"+export FOO=1{escaped}# the rest is a comment; touch PWNED" in shown, shown
    assert "@@ -0,0 +1 @@" in shown and char not in shown, shown
    assert not (ws / ".envrc").exists()


@pytest.mark.parametrize("old, new, shown", [
    ("export A=1\n", "export A=1\n++ 2>/dev/null; touch PWNED\n", "+++ 2>/dev/null; touch PWNED"),      # rt37f 20
    ("export A=1\n", "export A=1\n-- x; touch PWNED\n", "+-- x; touch PWNED"),
    ("", "test \"$CI\" = true &&\r\n  touch PWNED\n", "+test \"$CI\" = true &&\\r"),                 # rt37f 24
    ("test a &&\n  ./deploy.sh\n", "test a &&\r\n  ./deploy.sh\n", "+test a &&\\r"),                # rt37f 26
    (": skip \\\ntouch PWNED\n", ": skip \\\r\ntouch PWNED\n", "+: skip \\\\r"),                 # rt37d B2
    ("export A=1", "export A=1\n", "(no line changes: only the line break at the end of the file)")])
def test_the_diff_shows_every_line_as_written(ws, notices, monkeypatch, old, new, shown):
    """Lines the diff once hid: one added that starts with `++` (taken for the header), a \r before a line break
    (sh reads `&&\r` as the end of a list, `\\\r` as no continuation), a change that left the lines alike."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 200)
    real_prompt(monkeypatch, ["n"])
    if old:
        (ws / ".envrc").write_bytes(old.encode())
        kesi.read_file(".envrc")
    kesi.run_tools([use("write_file", {"file_path": ".envrc", "content": new})])
    assert shown in notices.getvalue(), notices.getvalue()


def test_the_diff_of_a_file_run_later_shows_lookalikes_as_escapes(ws, notices, monkeypatch):
    """rt37c 22: `export FOO=1 \uff03 the rest is a comment; touch PWNED` in an .envrc: the fullwidth sign read as a
    comment; bash runs the touch. As a command's question, a file run later is shown in ASCII (CJK letters kept)."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 200)
    real_prompt(monkeypatch, ["n", "n"])
    kesi.run_tools([use("write_file", {"file_path": ".envrc", "content": "export FOO=1 \uff03 rest; touch PWNED\n"})])
    kesi.run_tools([use("write_file", {"file_path": "notes.md", "content": "\u7b46\u8a18 \uff03 \u00e9t\u00e9\n"})])
    shown = notices.getvalue()
    assert "+export FOO=1 \\uff03 rest; touch PWNED" in shown and "+export FOO=1 \uff03" not in shown, shown
    assert "+\u7b46\u8a18 \uff03 \u00e9t\u00e9" in shown, shown          # a file not run later: as written


def test_a_cut_piece_of_a_command_never_passes_for_a_line_of_its_own(ws, notices, monkeypatch):
    """rt37c 2: a command's terminal-width cut was marked as its real line breaks are, so a tail `#  only the fast
    tests; touch PWNED` read as a comment line. Real lines are numbered; cut pieces are not."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 80)
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    command = "python3 -m pytest -q -k " + "a" * 16 + "#  only the fast tests; touch PWNED\necho two\necho three"
    kesi.ask_user(kesi.Question(f"run command: {command}"))
    rows = notices.getvalue().splitlines()
    cut = next(row for row in rows if "#  only the fast tests" in row)
    assert cut.startswith("        | #"), rows
    assert [row[:10] for row in rows if "echo" in row] == ["      2 | ", "      3 | "], rows


def test_characters_some_terminals_draw_wide_cannot_draw_a_question(ws, notices, monkeypatch):
    """rt25 61: a question's lines padded with hexagrams (two columns on Unicode 16 terminals, one in Python's
    tables) were wrapped by the terminal, and the tail began a row of its own; the question is now all ASCII."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 80)
    fake = "[permission needed] run command: python3 -m pytest -q"
    pads = range(5, 60, 4)
    real_prompt(monkeypatch, ["n"] * len(pads))
    for pad in pads:
        kesi.ask_user(kesi.Question("rm -rf src #" + "\u4dc0" * pad + fake, reason="`rm " + "\u2630" * pad + fake,
                                    always=f"Bash(rm {'¤' * pad}{fake}:*)"))
        notices.write("\n")                       # where the person's answer would end the line
    lines = notices.getvalue().splitlines()
    assert all(line.isascii() and len(line) <= 80 for line in lines), lines
    assert not [line for line in lines if line.lstrip().startswith(fake)]


@pytest.mark.parametrize("name", ["**", "*", "src/*.py"])
def test_a_file_named_as_a_glob_offers_no_rule_for_it(ws, user, name):
    """rt37f 25: `a` to creating a file named `**` saved Edit(**), and every file was written unasked after it."""
    person = user("n")
    kesi.check_permission("write_file", {"file_path": name, "content": "x"})
    assert person.questions and person.questions[0].always is None, person.questions


def test_cjk_quotation_brackets_are_escaped_in_what_the_person_approves():
    """rt37f 6: 「 and 」 read as quotes around a note, where sh saw none and ran the `touch` inside."""
    shown = kesi.ascii_only("echo 「作業メモ: 次; touch X」 。")
    assert shown == "echo \\u300c作業メモ: 次; touch X\\u300d 。", shown
    assert kesi.ascii_only("cat <<-EOF\n\tEOF") == "cat <<-EOF\n\\tEOF"          # a tab ends <<-: rt37f 35
