"""The classifier reads a command the way /bin/sh does.

Word splitting, quote removal and backslashes are compared with the real
/bin/sh: printf prints each word sh sees, and command_segments must give
the same words. A disagreement is how "cat\\r/..." once passed as cat.
"""
import subprocess

import pytest

import kesi

SAMPLES = [
    "cat README.md", "cat\r/zz/../../bin/sh payload.sh", "a\rb c", "'s'udo id", "s''udo id", "\\sudo id",
    "s\\udo id", "\"a b\" c", "a\"b c\"d", "'a\\b' c", "\"a\\\"b\" c", "\"a\\$b\" c", "\"a\\qb\"",
    "a\\ b c", "x\\\ny z", "\"x\\\ny\"", "a\tb", "a\x0bb c", "a\x0cb", "a\u00a0b c", "a\u200bb",
    "'' x", "\"\" y", "a'b'\"c\" d", "a # comment", "a#b c", "tab\there", "  lead  trail  ",
]


def sh_words(command: str) -> list[str]:
    out = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + command], capture_output=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.decode().split("\0")[:-1]      # bytes: text mode would turn \r into \n


@pytest.mark.parametrize("command", SAMPLES)
def test_words_agree_with_sh(command):
    segments = kesi.command_segments("printf '%s\\0' " + command)
    assert segments is not None and len(segments) == 1
    assert segments[0][2:] == sh_words(command), repr(command)


@pytest.mark.parametrize("command, segments", [
    ("ls; pwd", [["ls"], ["pwd"]]), ("ls&&pwd||id", [["ls"], ["pwd"], ["id"]]), ("ls|wc", [["ls"], ["wc"]]),
    ("ls\npwd", [["ls"], ["pwd"]]), ("(cd x; ls)", [["cd", "x"], ["ls"]]), ("echo 'a;b'", [["echo", "a;b"]]),
    ("2>/dev/null sudo id", [["sudo", "id", "/dev/null"]]), ("cat <in >out x", [["cat", "x", "in", "out"]]),
    ("ls 2>&1", [["ls", "1"]]), ("echo $'\\x73u\\144o'", [["echo", "sudo"]]), ("echo \"$(id)\"", [["echo", "$(id)"]]),
])
def test_segments(command, segments):
    assert kesi.command_segments(command) == segments


def test_unclosed_quotes_cannot_be_read():
    for command in ("cat 'x", 'cat "x', "echo $'x"):
        assert kesi.command_segments(command) is None
        assert kesi.classify_command(command)[0] == "ask"


def test_unwrap_command_finds_the_real_program():
    assert kesi.unwrap_command(["env", "-u", "HOME", "FOO=1", "nohup", "pytest", "-q"]) == ["pytest", "-q"]
    assert kesi.unwrap_command(["command", "-p", "exec", "-a", "x", "ls"]) == ["ls"]
    assert kesi.unwrap_command(["{", "!", "ls"]) == ["ls"]


def test_root_targets_and_removals(ws):
    home = str(kesi.HOME_DIR)
    for target in ["/", "~", "~/", "$HOME", "${HOME:?}", "~root", f"{home}/..", "/usr", "/*", "~/.[!.]*"]:
        assert kesi.is_root_target(target, ws), target
    for target in ["build", "./build", "~/project/build", f"{home}/notes.txt", "*.pyc", "/tmp/x/y"]:
        assert not kesi.is_root_target(target, ws), target
    assert kesi.is_root_removal(["rm", "-rf", "--", "/"])
    assert kesi.is_root_removal(["rm", "-rf", "."], kesi.HOME_DIR)
    assert not kesi.is_root_removal(["rm", "-rf", "."], ws)
    assert not kesi.is_root_removal(["ls", "/"])
    assert "/" in kesi.ROOT_TARGETS and "~" in kesi.ROOT_TARGETS


def test_long_commands_ask():
    assert kesi.classify_command("echo " + "x" * kesi.MAX_CHECKED_CHARS)[0] == "ask"
    assert kesi.classify_command("echo hi")[0] == "allow"


# --- backslash-newline is joined as sh joins it; option=value arguments name paths ----------------

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


@pytest.mark.parametrize("command", ["diff --from-file=.env README.md", "wc --files0-from=.env"])
def test_option_value_naming_a_secret_is_asked_about(ws, command):
    (ws / ".env").write_text("KEY=1\n")
    (ws / "README.md").write_text("hi\n")
    verdict, reason = kesi.classify_command(command)
    assert verdict == "ask"
    assert "may not read" in reason
    assert kesi.touches_forbidden(command.split())


def test_odd_spellings_are_judged_not_crashed_on():
    # A here-document with no command, and a cd to an unknown folder before another cd,
    # once raised inside the classifier (IndexError, TypeError) instead of giving a verdict.
    assert kesi.classify_command("<<#\n")[0] == "ask"
    assert kesi.classify_command("cd $X; cd /tmp; rm -rf ..")[0] == "deny"     # /tmp/.. is /
    assert kesi.hard_denial_reason("cd $X; cd /; rm -rf .") is not None


def test_brace_groups_expand_no_further_than_the_limit():
    # 25 groups of {a,b} are 2**25 words; expanding all of them before the cut hung the classifier.
    words = kesi.brace_alternatives("x" + "{a,b}" * 25)
    assert len(words) == 64 and words[0] == "x" + "a" * 25
    assert kesi.hard_denial_reason("rm -rf /{a,b}" + "{c,d}" * 24) is not None


def test_a_failing_check_becomes_an_error_result_not_a_crash(monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")
    monkeypatch.setattr(kesi, "check_permission", broken)
    block = {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"file_path": "a.txt"}}
    results, interrupted = kesi.run_tools([block])
    assert not interrupted and results[0]["is_error"] and "boom" in results[0]["content"]
