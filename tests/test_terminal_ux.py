"""The terminal experience, through a real pseudo-terminal against the mock:
a paste is one prompt (bracketed paste), Ctrl-D inside a multi-line prompt
ends that prompt instead of KeSi, and at the turn limit the person is asked
whether the task may go on.

The pty helper is the one of test_permissions.py: a session of its own with
the pty as controlling terminal (Ctrl-C is a real SIGINT) and a wide window.
"""
import sys

import kesi
from checklib import kesi_subprocess_env
from mock_api import reply, tool_call
from test_permissions import KESI, Terminal


def repl(ws, mock, **env):
    return Terminal([sys.executable, KESI], ws, kesi_subprocess_env(mock, KESI_SANDBOX="off", **env))


def prompts_sent(mock) -> list[str]:
    """The last user message of every request, as text."""
    return [kesi.text_of(r["body"]["messages"][-1]["content"]) for r in mock.requests]


def leave(term):
    term.type("/exit\n")
    term.close()
    assert term.proc.returncode == 0, term.seen[-2000:]


# --- paste ----------------------------------------------------------------------------

def test_a_bracketed_paste_is_one_prompt_and_blocks_and_continuations_still_work(ws, mock_client):
    mock, _ = mock_client(["pasted", "block", "continued"])
    term = repl(ws, mock, TERM="xterm")
    try:
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
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert prompts_sent(mock) == ['Traceback (most recent call last):\n  File "app.py", line 3\n'
                                  "ZeroDivisionError: division by zero", "first\n  second", "one \ntwo"]


def test_a_dumb_terminal_is_not_sent_the_paste_escape(ws, mock_client):
    mock, _ = mock_client(["ok"])
    term = repl(ws, mock, TERM="dumb")
    try:
        term.expect("you > ")
        leave(term)
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert "\x1b" not in term.seen


# --- Ctrl-D inside a multi-line prompt -----------------------------------------------------

def test_ctrl_d_inside_a_block_ends_the_block_and_keeps_kesi_running(ws, mock_client):
    mock, _ = mock_client(["got the block", "got the line", "still here"])
    term = repl(ws, mock, TERM="dumb")
    try:
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
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert prompts_sent(mock) == ["first line\nsecond line", "half a line", "are you there?"]


# --- the turn limit -----------------------------------------------------------------------

def test_at_the_turn_limit_the_repl_offers_to_go_on(ws, mock_client):
    step = reply(tool_call("list_files", {}))
    mock, _ = mock_client([step, step, step, "finished after three steps",     # task 1: "y"
                           step, step,                                           # task 2: "n"
                           "the journal is still valid"])
    term = repl(ws, mock, TERM="dumb", KESI_MAX_TURNS="2")
    try:
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
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert [r["status"] for r in mock.requests] == [200] * 7
