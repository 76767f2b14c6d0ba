"""Nothing from the model, a file or a command reaches the terminal raw.

A real `kesi.py` REPL on a pseudo-terminal, against the mock API, with model
text, tool inputs, command output, a file name, a todo list, a sub-agent
description, an API error and a saved session title that all carry escape
sequences: cursor up / erase line (the spoofed approval prompt), carriage
returns, OSC 52 (writes the clipboard), the one-byte C1 CSI and a bidi
override. The raw bytes the terminal received must contain none of them,
and the approval prompt must show the spoofed command in full.
"""
import json
import re
import subprocess
import unicodedata
import sys

import checklib
import kesi
from mock_api import MockAPI, error, reply, tool_call
from ptyterm import Terminal

KESI = str(checklib.ROOT / "kesi.py")
ERASE = "\x1b[2K\x1b[1A"
OSC52 = "\x1b]52;c;UFdORUQ=\x07"
SPOOF = f"python -m pytest -q{ERASE}\r" + " " * 90 + "; touch PWNED && echo spoofed-tail-mark"
EVIL = f"{ERASE}\r{OSC52}\x9b31m\u202eevil\x08\x7f"


def assert_no_raw_controls(raw: bytes) -> None:
    """No ESC, C1 CSI, BEL, backspace, DEL or bidi override; a CR only as the pty's CR LF."""
    for byte, name in [(b"\x1b", "ESC"), ("\x9b".encode(), "C1 CSI"), (b"\x07", "BEL"), (b"\x08", "BS"),
                       (b"\x7f", "DEL"), ("\u202e".encode(), "RLO")]:
        assert byte not in raw, (name, raw[max(raw.find(byte) - 200, 0):raw.find(byte) + 50])
    assert not re.search(rb"\r(?!\n)", raw), raw[:3000]


def script():
    return [
        reply(f"Looking {EVIL} now.",
              tool_call("run_command", {"command": SPOOF}),
              tool_call("write_file", {"file_path": "notes.txt", "content": f"line one\nadded {ERASE}\rhidden\n"}),
              tool_call("run_command", {"command": "cat evil.txt"}),
              tool_call("read_file", {"file_path": f"missing{ERASE}.txt"}),
              tool_call("todo_write", {"todos": [{"content": f"plan {OSC52}", "status": "pending"}]}),
              tool_call(f"bogus{ERASE}", {"x": 1})),
        reply(tool_call("task", {"prompt": "look around", "description": f"sub {ERASE} agent"})),
        reply(f"sub-agent answer {OSC52}"),
        reply(f"final {EVIL} answer-mark"),
        error(400, f"bad request {ERASE}{OSC52}"),
    ]


def test_no_escape_from_model_or_tool_text_reaches_the_terminal(tmp_path):
    ws = tmp_path.resolve()
    (ws / "evil.txt").write_text(f"first line\nclipboard {OSC52} and {ERASE} last-line-mark\n")
    old_session = checklib.records_of(ws) / "sessions" / "20200101-000000-000000-1.jsonl"
    old_session.parent.mkdir(parents=True)
    old_session.write_bytes(kesi.record_lines(old_session, [{"title": f"old {OSC52} title{ERASE}"},
                                                            {"role": "user", "content": "hi"}]))
    with MockAPI(script()) as mock:
        env = checklib.kesi_subprocess_env(mock, TERM="dumb", KESI_SANDBOX="off")
        term = Terminal([sys.executable, KESI], ws, env)
        try:
            term.expect("you > ")
            term.type("go\n")
            term.expect("[permission needed] run command: python -m pytest -q")
            term.expect("Allow? [")
            shown = term.seen.split("[permission needed] run command: python -m pytest -q")[-1]
            assert "spoofed-tail-mark" in shown.replace("\r\n        | ", ""), shown   # all of it, cut by KeSi alone
            term.type("n\n")
            term.expect("[permission needed] write_file wants to create notes.txt")
            term.expect("Allow? [")
            term.type("n\n")
            term.expect("answer-mark")
            term.expect("you > ")
            term.type("again\n")
            term.expect("bad request")
            term.expect("you > ")
            term.type("/todo\n")
            term.expect("plan")
            term.expect("you > ")
            term.type("/resume\n")
            term.expect("/resume N continues")
            term.expect("you > ")
            term.type("/exit\n")
        finally:
            term.close()
    raw = term.raw
    assert term.proc.returncode == 0, raw[-2000:]
    assert not (ws / "PWNED").exists() and not (ws / "notes.txt").exists()
    assert_no_raw_controls(raw)
    shown = raw.decode("utf-8", "replace")
    # Shown visibly instead: the user can see that something odd is there.
    assert r"python -m pytest -q\x1b[2K\x1b[1A\r" in shown
    assert r"+added \x1b[2K\x1b[1A\rhidden" in shown       # the diff preview hides no line (sh reads a lone \r in it)
    assert r"> clipboard \x1b]52;c;UFdORUQ=\x07 and \x1b[2K\x1b[1A last-line-mark" in shown   # command summary
    assert r"x Error: missing\x1b[2K\x1b[1A.txt was not found" in shown   # an error naming a file
    assert r"[tool] bogus\x1b[2K\x1b[1A(x=1)" in shown                     # a tool line
    assert r"\x9b31m\u202eevil" in shown                             # streamed text
    assert r"sub \x1b[2K\x1b[1A agent" in shown                       # sub-agent description
    assert r"old \x1b]52;c;UFdORUQ=\x07 title" in shown               # a saved session's title
    assert r"bad request \x1b[2K" in shown                           # an API error line
    assert len(mock.requests) == 5


def side_by_side(argv, cwd, env, last_text) -> tuple[subprocess.CompletedProcess, Terminal]:
    """The same headless run through a pipe and on a terminal at once (each is a Python starting up);
    the terminal's run has ended once it showed last_text."""
    piped = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        with Terminal(argv, cwd, env) as term:
            term.expect(last_text)
        out, err = piped.communicate(timeout=120)
    finally:
        piped.kill()
    return subprocess.CompletedProcess(argv, piped.returncode, out, err), term


def test_headless_answer_is_sanitised_on_a_terminal_and_exact_in_a_pipe(tmp_path):
    answer = f"answer {OSC52} end"
    with MockAPI([reply(answer), reply(answer)]) as mock:
        env = checklib.kesi_subprocess_env(mock, TERM="dumb", KESI_SANDBOX="off")
        piped, term = side_by_side([sys.executable, KESI, "-p", "hi"], tmp_path, env, "end")
    assert term.proc.returncode == 0 and piped.returncode == 0, (term.raw, piped.stderr)
    assert_no_raw_controls(term.raw)
    assert r"answer \x1b]52;c;UFdORUQ=\x07 end" in term.raw.decode()
    assert piped.stdout == answer + "\n"          # a file or pipe gets the model's text as written


def test_visible_shows_every_terminal_control_and_keeps_text():
    assert kesi.visible("a\tb\nc") == "a\tb\nc"
    assert kesi.visible("line\r\n") == "line\n"
    assert kesi.visible(f"x{ERASE}\ry\x9b\u202e\u2066\x00\x7f") == r"x\x1b[2K\x1b[1A\ry\x9b\u202e\u2066\x00\x7f"
    assert kesi.visible("café 台語 ✓") == "café 台語 ✓"
    assert kesi.visible("\udcff") == r"\udcff"


# --- round 3: characters that show nothing, JSON on a terminal, the audit log ----------

INVISIBLE = ["\u00ad", "\u180e", "\U000e0041", "\ufff9", "\u206a", "\U0001d173", "\u115f", "\u3164", "\u034f",
             "\ufe0f", "\u17b4", "\u2064"]


def test_characters_that_show_nothing_are_escaped_and_make_a_command_ask():
    for char in INVISIBLE:
        shown = kesi.visible(f"bu{char}ild")
        assert char not in shown and shown.startswith("bu\\") and shown.endswith("ild"), repr(shown)
        verdict, reason = kesi.classify_command(f"ls bu{char}ild")
        assert verdict == "ask" and shown[2:-3] in reason and char not in reason, (repr(char), reason)


def test_headless_json_is_ascii_on_a_terminal_and_utf8_in_a_pipe(tmp_path):
    answer = "answer \u202eevil \x9b31m 台語"
    with MockAPI([reply(answer), reply(answer)]) as mock:
        env = checklib.kesi_subprocess_env(mock, TERM="dumb", KESI_SANDBOX="off")
        argv = [sys.executable, KESI, "-p", "hi", "--output-format", "json"]
        piped, term = side_by_side(argv, tmp_path, env, "session_id")
    assert_no_raw_controls(term.raw)
    assert "\\u202eevil" in term.raw.decode() and "\\u53f0" in term.raw.decode()
    assert json.loads(piped.stdout)["result"] == answer               # a pipe gets the exact text


def test_log_shows_a_planted_audit_entry_escaped(ws):
    planted = {"at": "2026-12-03T10:00:00", "command": "ls", "decision": "allowed",
               "exit_code": f"0{OSC52}\x1b[2J", "seconds": f"1{ERASE}"}
    kesi.append_records(kesi.records_folder() / kesi.AUDIT_LOG, [planted])
    screen = checklib.capture_ui()
    kesi.show_log("")
    shown = screen.getvalue()
    assert "exit 0" in shown and "\x1b" not in shown and "\x07" not in shown, repr(shown)


# --- rt24 13-15, 35, 74, 75: characters that pass for a space, a comment sign or a quote ----------

BLANKS = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) in ("Zs", "Zl", "Zp") and c != 0x20]
BLANKS += ["\u2800", "\u3164", "\uffa0", "\u115f", "\u1160"]       # blank glyphs of letters and symbols
LOOKALIKES = ["\uff03", "\uff1b", "\uff06", "\uff5c", "\ua78c", "\u02bc", "\u037e", "\ufe5f"]   # ＃ ； ＆ ｜ ꞌ ʼ ; ﹟


def test_characters_that_look_like_a_space_are_escaped_and_make_a_command_ask():
    """`true<NBSP>#;touch PWNED` read as a comment but ran: a blank that is not an ASCII space is an escape."""
    assert len(BLANKS) >= 20
    for char in BLANKS:
        for shown in (kesi.visible(f"true{char}#;x"), kesi.one_line(f"true{char}#;x")):
            assert char not in shown and shown == f"true{ascii(char)[1:-1]}#;x", (repr(char), shown)
        assert kesi.classify_command(f"git status{char}#;touch x")[0] == "ask", repr(char)


def test_the_permission_question_shows_a_command_in_ascii_on_a_real_terminal(tmp_path):
    """rt24 15, 75: the command line of a question escapes every non-ASCII character but CJK letters, so neither a
    blank nor a lookalike of '#', ';' or a quote can make a command read as something else."""
    commands = [f"git status{char}#;touch PWNED" for char in BLANKS[::4] + LOOKALIKES]
    commands.append("git commit -m '修正「登入」、テスト。한국어' && touch PWNED")     # letters of CJK stay readable
    readable = "git commit -m '修正\\u300c登入\\u300d、テスト。한국어' && touch PWNED"   # 「」 read as quotes: rt37f 6
    with MockAPI([reply(*(tool_call("run_command", {"command": c}, id=f"t{i}") for i, c in enumerate(commands))),
                  reply("done")]) as mock:
        with Terminal([sys.executable, KESI], tmp_path, checklib.kesi_subprocess_env(mock, TERM="dumb")) as term:
            term.expect("you > ")
            term.type("go\n")
            for command in commands:
                term.expect("Allow? [")
                term.type("n\n")
            term.expect("you > ")
            assert term.leave() == 0
    questions = re.findall(r"\[permission needed\] run command: (.*)", term.seen)
    assert [q.strip() for q in questions] == [ascii(c)[1:-1] for c in commands[:-1]] + [readable], questions
    assert not (tmp_path / "PWNED").exists()
