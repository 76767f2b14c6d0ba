"""Checkpoints and /rewind: before write_file or edit_file changes a file, KeSi keeps it as it was (once a turn),
signed beside the session record; /rewind puts files, the conversation or both back to just before a turn.
Driven as a person would: kesi.py on a real pty, the real SDK over HTTP to the mock."""
import os

import kesi
from mock_api import MockAPI, reply, tool_call


def edit(path, old, new):
    return tool_call("edit_file", {"file_path": path, "old_string": old, "new_string": new})


def write(path, content):
    return tool_call("write_file", {"file_path": path, "content": content})


TWO_TURNS = [reply("editing", edit("keep.txt", "original", "turn one"), write("new.txt", "made in turn 1\n")),
             "done one",
             reply("editing again", edit("keep.txt", "turn one", "turn two"), edit("new.txt", "turn 1", "turn 2")),
             "done two"]


def two_turns(term):
    for prompt, answer in (("first change", "done one"), ("second change", "done two")):
        term.expect("you > ")
        term.type(prompt + "\n")
        term.expect(answer)
    term.expect("you > ")


def rewind(term, turn, how, go="y"):
    """/rewind, pick a turn and what to restore; returns what the preview showed."""
    term.type("/rewind\n")
    term.expect("Rewind to just before turn (a number; Enter: none): ")
    term.type(f"{turn}\n")
    term.expect("b = both? (Enter: none) ")
    term.type(f"{how}\n")
    shown = term.expect(f"Restore this, as it was just before turn {turn}? [y/N] ")
    if go:
        term.type(go + "\n")
        term.expect("you > ")
    return shown[shown.rfind("you > "):]


def checkpoint_record():
    return next(kesi.records_folder("sessions").glob("*.checkpoints"))


def prompts_of(request):
    return [kesi.text_of(m["content"]) for m in request["body"]["messages"] if kesi.is_user_prompt(m)]


def test_rewind_restores_files_and_after_resume_the_conversation(ws, kesi_pty):
    (ws / "keep.txt").write_text("original\n")
    with MockAPI(TWO_TURNS) as mock, kesi_pty(ws, mock, "--permission-mode", "acceptEdits", TERM="dumb") as term:
        two_turns(term)
        assert (ws / "keep.txt").read_text() == "turn two\n" and (ws / "new.txt").exists()
        shown = rewind(term, 1, "f")
        assert '1. ' in shown and '"first change"  keep.txt, new.txt' in shown
        assert '"second change"  keep.txt, new.txt' in shown
        assert "files changed by commands, run_command or !command, are not kept: /rewind cannot restore" in shown
        assert "keep.txt: put back (9 bytes)" in shown and "new.txt: removed (it did not exist)" in shown
        assert term.leave() == 0
    assert (ws / "keep.txt").read_text() == "original\n" and not (ws / "new.txt").exists()
    # files only: the conversation is whole, and -c brings it back with its checkpoints
    with MockAPI(["fresh start"]) as mock, kesi_pty(ws, mock, "-c", TERM="dumb") as term:
        term.expect("Resumed")
        shown = rewind(term, 2, "c")
        assert "conversation: back to 4 messages (from 8)" in shown and "keep.txt" not in shown.split("both?")[1]
        assert "conversation rewound to just before turn 2 (4 messages)" in term.seen
        term.type("hello again\n")
        term.expect("fresh start")
        term.expect("you > ")
        assert term.leave() == 0
    assert prompts_of(mock.requests[0]) == ["first change", "hello again"] and len(mock.requests) == 1
    assert (ws / "keep.txt").read_text() == "original\n"      # conversation only: files untouched
    with MockAPI([]) as mock, kesi_pty(ws, mock, "-c", TERM="dumb") as term:    # the cut journal was saved
        term.expect("Resumed")
        assert "6 messages. Last prompt: hello again" in term.expect("you > ")
        assert term.leave() == 0


def test_rewind_both_cuts_the_journal_where_the_turn_began_and_the_api_accepts_it(ws, kesi_pty):
    (ws / "keep.txt").write_text("original\n")
    with MockAPI(TWO_TURNS + ["after the rewind"]) as mock, \
            kesi_pty(ws, mock, "--permission-mode", "acceptEdits", TERM="dumb") as term:
        two_turns(term)
        shown = rewind(term, 2, "b")
        assert "conversation: back to 4 messages (from 8)" in shown
        assert "keep.txt: put back (9 bytes)" in shown and "new.txt: put back (15 bytes)" in shown
        term.type("third\n")
        term.expect("after the rewind")
        term.expect("you > ")
        assert term.leave() == 0
    assert (ws / "keep.txt").read_text() == "turn one\n" and (ws / "new.txt").read_text() == "made in turn 1\n"
    assert [r["status"] for r in mock.requests] == [200] * 5
    assert prompts_of(mock.requests[-1]) == ["first change", "third"]
    assert mock.requests[-1]["body"]["messages"][:4] == mock.requests[2]["body"]["messages"][:4]
    # back to nothing: saved as such, so -c does not bring the old conversation back
    with MockAPI([]) as mock, kesi_pty(ws, mock, "-c", TERM="dumb") as term:
        term.expect("Resumed")
        rewind(term, 1, "b")
        assert term.leave() == 0
    assert (ws / "keep.txt").read_text() == "original\n" and not (ws / "new.txt").exists()
    with MockAPI([]) as mock, kesi_pty(ws, mock, "-c", TERM="dumb") as term:
        assert "0 messages" in term.expect("you > ")
        term.type("/rewind 2\n")          # turn 2 began after messages that are gone now
        term.expect("b = both? (Enter: none) ")
        term.type("c\n")
        assert "(nothing restored; the conversation no longer holds that turn: f restores its files)" in term.expect(
            "you > ")
        assert term.leave() == 0


def one_turn(term, prompt: str) -> None:
    """At the prompt, one turn the mock answers with "done"; back at the prompt."""
    term.expect("you > ")
    term.type(f"{prompt}\n")
    term.expect("done")
    term.expect("you > ")


def one_turn_then_rewind_files(ws, kesi_pty, script, prompt, mode) -> str:
    """One turn at a real terminal, then /rewind 1 f: what it showed."""
    with MockAPI(script) as mock, kesi_pty(ws, mock, "--permission-mode", mode, TERM="dumb") as term:
        one_turn(term, prompt)
        shown = rewind(term, 1, "f")
        assert term.leave() == 0
    return shown


def test_a_file_a_command_changed_is_not_covered_and_rewind_says_so(ws, kesi_pty):
    script = [reply(tool_call("run_command", {"command": "echo by a command > cmd.txt"}), write("tool.txt", "x")),
              "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "make two files", "bypassPermissions")
    assert '"make two files"  tool.txt' in shown
    assert "not covered: what this command changed stays: $ echo by a command > cmd.txt" in shown
    assert not (ws / "tool.txt").exists() and (ws / "cmd.txt").read_text() == "by a command\n"


def test_a_tampered_or_planted_checkpoint_restores_nothing(ws, kesi_pty):
    script = [reply(write("new.txt", "made\n")), "done"]
    with MockAPI(script) as mock, kesi_pty(ws, mock, "--permission-mode", "acceptEdits", TERM="dumb") as term:
        one_turn(term, "make a file")
        assert term.leave() == 0
    record = checkpoint_record()
    lines = record.read_bytes().splitlines(keepends=True)
    assert b'"path": "new.txt", "data": null' in lines[1]
    # a planted line: "before turn 1, notes.txt did not exist" (so /rewind would remove it), signed by another key
    planted = lines[1].replace(b"new.txt", b"notes.txt")
    (ws / "notes.txt").write_text("the user's own notes\n")
    for forged in ([lines[0], planted, lines[1]], [lines[0], b"0" * 64 + planted[64:], lines[1]]):
        record.write_bytes(b"".join(forged))
        with MockAPI([]) as mock, kesi_pty(ws, mock, "-c", TERM="dumb") as term:
            term.expect("you > ")
            term.type("/rewind 1\n")
            shown = term.expect("you > ")
            assert term.leave() == 0
        assert f"/rewind restores nothing: line 2 of {record.name} was not written by KeSi" in shown
        assert "Restore" not in shown
    assert (ws / "notes.txt").exists() and (ws / "new.txt").exists()


def test_a_link_swapped_into_the_path_before_the_yes_is_refused_by_the_jail(ws, kesi_pty, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    script = [reply(write("sub/new.txt", "made\n")), "done"]
    with MockAPI(script) as mock, kesi_pty(ws, mock, "--permission-mode", "acceptEdits", TERM="dumb") as term:
        one_turn(term, "make a file")
        shown = rewind(term, 1, "f", go=None)
        assert "sub/new.txt: removed (it did not exist)" in shown
        os.rename(ws / "sub", outside / "sub")          # now sub/new.txt leads out of the workspace
        os.symlink(outside / "sub", ws / "sub")
        term.type("y\n")
        shown = term.expect("you > ")
        assert "NOT restored sub/new.txt: it changed, or a link came into its path" in shown
        assert term.leave() == 0
    assert (outside / "sub" / "new.txt").read_text() == "made\n"


def test_a_file_over_the_limit_is_not_kept_and_rewind_says_so(ws, kesi_pty):
    (ws / "big.txt").write_text("x" * (kesi.MAX_KEPT_BYTES + 1))
    script = [reply(tool_call("edit_file", {"file_path": "big.txt", "old_string": "x" * 10, "new_string": "y",
                                            "replace_all": True}), write("small.txt", "s")), "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "shrink it", "acceptEdits")
    assert "big.txt: left as it is: not kept (over 2 MB)" in shown
    assert not (ws / "small.txt").exists() and (ws / "big.txt").stat().st_size < kesi.MAX_KEPT_BYTES


def test_a_file_deleted_after_its_checkpoint_comes_back_with_the_bytes_shown(ws, kesi_pty):
    """rt24d: the preview said "put back (17 bytes)" and /rewind wrote the file empty."""
    (ws / "a.txt").write_text("kept before edit\n")
    script = [reply(tool_call("read_file", {"file_path": "a.txt"})),
              reply(write("a.txt", "changed\n"), tool_call("run_command", {"command": "rm a.txt"})), "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "change then delete", "bypassPermissions")
    assert "a.txt: put back (17 bytes)" in shown, shown
    assert (ws / "a.txt").read_text() == "kept before edit\n"


def test_rewind_names_every_command_of_the_turns_it_undoes(ws, kesi_pty):
    """rt24f: only the last five were listed, and an earlier command that planted a Makefile went unmentioned."""
    calls = [tool_call("run_command", {"command": f"echo {n} > cmd{n}.txt"}) for n in range(7)]
    script = [reply(*calls, write("tool.txt", "x")), "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "seven commands", "bypassPermissions")
    assert all(f"$ echo {n} > cmd{n}.txt" in shown for n in range(7)), shown


def test_rewind_names_a_command_however_many_refusals_came_after_it(ws, kesi_pty):
    """rt24g: 500 refused commands (each an audit entry) pushed the one that planted a Makefile out of the list."""
    calls = [tool_call("run_command", {"command": "echo planted > Makefile"}),
             *(tool_call("run_command", {"command": f"sudo true {n}"}) for n in range(520))]
    script = [reply(*calls, write("tool.txt", "x")), "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "many refusals", "bypassPermissions")
    assert "$ echo planted > Makefile" in shown and "sudo true" not in shown, shown



def test_a_file_name_cannot_draw_a_turn_of_its_own_in_the_rewind_list(ws, kesi_pty):
    """A file name padded to the width wrapped on the terminal, and its tail began a row that read as another turn."""
    fake = '9. 10:00  "run the tests"  -'
    name = "notes" + " " * 30 + fake + ".txt"
    with MockAPI([reply("writing", write(name, "x\n")), "done"]) as mock, \
            kesi_pty(ws, mock, "--permission-mode", "acceptEdits", TERM="dumb", columns=60) as term:
        term.expect("you > ")
        term.type("write it\n")
        term.expect("done")
        term.expect("you > ")
        term.type("/rewind\n")
        shown = term.expect("Rewind to just before turn (a number; Enter: none): ")
        term.type("\n")
        term.expect("you > ")
        assert term.leave() == 0
    listed = [line for line in shown[shown.rfind("/rewind\r\n"):].splitlines() if line.startswith(("  ", "notes"))]
    assert listed and all(len(line) < 60 for line in listed), listed
    assert not [line for line in listed if line.strip().startswith(fake)], listed


def test_rewind_shows_what_a_file_run_later_becomes_and_leaves_a_long_change_alone(ws, kesi_pty):
    """rt38c 2: a command wrote .envrc (`touch PWNED`), the person approved an edit taking that line out, and /rewind
    put the command's bytes back with no diff, called "as it was just before turn 1"."""
    (ws / ".envrc").write_text("export A=1\n")
    (ws / "tools").mkdir()
    (ws / "tools" / ".vimrc").write_text("set nu\n")
    script = [reply(tool_call("run_command", {"command": "printf 'touch PWNED\\nexport A=1\\n' > .envrc; "
                                                         "seq 100 | sed 's/^/\" /' >> tools/.vimrc"}),
                    tool_call("read_file", {"file_path": ".envrc"}),
                    tool_call("read_file", {"file_path": "tools/.vimrc"})),
              reply(write(".envrc", "export A=1\n"), write("tools/.vimrc", "set nu\n")), "done"]
    shown = one_turn_then_rewind_files(ws, kesi_pty, script, "clean up", "bypassPermissions")
    assert ".envrc: put back (23 bytes)" in shown and "+touch PWNED" in shown, shown
    assert "tools/.vimrc: left as it is: runs later, and its change is over 30 rows" in shown, shown
    assert "(files other tools run later, each diff shown above: .envrc)" in shown, shown     # just above the y
    assert (ws / "tools" / ".vimrc").read_text() == "set nu\n"
