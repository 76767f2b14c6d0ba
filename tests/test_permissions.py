"""Permissions: classify_command, ask_user, grants, modes, refusals in a batch.

The prompt itself is driven twice: in-process with a stand-in terminal, and
for real over a pseudo-terminal with a kesi.py child talking to the mock API.
The --permission-mode values are exercised through headless kesi.py -p runs.
"""
import builtins
import contextlib
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import kesi
from checklib import kesi_subprocess_env, tool_use
from ptyterm import Terminal
from mock_api import MockAPI, reply, tool_call

ROOT = Path(__file__).resolve().parent.parent
KESI = str(ROOT / "kesi.py")
child_env = kesi_subprocess_env   # the mock, a test key and a shared bytecode cache
HOME = str(kesi.HOME_DIR)

DENY = [
    "sudo ls", "su -", "doas ls", "/usr/bin/sudo ls", "SUDO_ASKPASS=x sudo -A ls", "sudo",
    "rm -rf /", "rm -rf /*", "rm -rf //", "rm -rf /./", "rm -rf '/'", "rm -rf -- /",
    "rm -rf --no-preserve-root /", "rm -r -f /", "rm -rf build /", "/bin/rm -rf /",
    "rm -rf ~", "rm -rf ~/", "rm -rf ~/*", "rm -rf $HOME", "rm -rf $HOME/", "rm -rf $HOME/*",
    "rm -rf ${HOME}", "rm -rf ${HOME}/", "rm -rf ${HOME}/*", 'rm -rf "$HOME"', "rm -rf /root",
    "rm -rf /root/", "rm -rf /home", f"rm -rf {HOME}", f"rm -rf {HOME}/", f"rm -rf {HOME}/*",
    "rmdir ~", "shred -u ~/*", "srm -r ~",
    "ls; sudo rm -rf /", "ls && sudo ls", "ls || doas ls", "ls & sudo ls", "ls | xargs rm -rf ~",
    "echo ok\nrm -rf /", "echo ok\nrm -rf ~", "ls\nsudo ls",
    "env rm -rf /", "env -i sudo ls", "FOO=bar rm -rf /", "nohup rm -rf ~", "timeout 5 rm -rf /",
    "nice -n 5 sudo ls", "time rm -rf /", "command sudo ls", "exec sudo ls",
    "sh -c 'rm -rf /'", 'sh -c "rm -rf /"', "bash -c 'ls; rm -rf ~'", "bash -lc 'rm -rf /'",
    "sh -ec 'sudo ls'", "bash --norc -c 'rm -rf /'", "env sh -c 'rm -rf ~'",
]
ASK = [
    "pytest -q", "python -m pytest -v", "git push", "git clean -fdx", "rm -rf build", "rm important",
    "ls *.py", "cat $(ls)", "cat `ls`", "echo hi > file.txt", "cat < README.md", "echo $HOME", "ls ~",
    "git diff --output report.txt", "git diff --output=report.txt", "git log --ext-diff",
    "git show --textconv", "git -c core.pager=sh log", "git --git-dir=/tmp/x status",
    "cat .env", "cat config/.env", "cat .env.local", "head -5 .git/config", "ls node_modules",
    "cat outside-link", "cat /etc/passwd", "ls ..", "cd / && ls",
    "python3 -c \"import shutil; shutil.rmtree('/')\"",   # accepted: ask, not deny
    "cat 'unclosed", "", "   ",
]
ALLOW = ["ls", "ls -la", "pwd", "git status", "git status --porcelain", "git log -p", "git diff",
         "git show HEAD", "cat README.md", "ls; pwd", "cat README.md | wc -l", "head -5 src/app.py",
         "date", "which python3", "echo hello world", "du -sh src", "stat README.md", "ls\n"]
PROJECT = {"README.md": "# demo\n", "src/app.py": "print('app')\n", "rules.py": "x = 1\n",
           ".env": "KEY=1\n", "config/.env": "KEY=2\n", ".env.local": "KEY=3\n", ".git/config": "[core]\n"}


@pytest.fixture
def project(ws, tmp_path_factory):
    for rel, text in PROJECT.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    outside = tmp_path_factory.mktemp("outside") / "notes.txt"
    outside.write_text("outside\n")
    (ws / "outside-link").symlink_to(outside)
    return ws


# --- classify_command ----------------------------------------------------------

@pytest.mark.parametrize("command", DENY)
def test_hard_deny(project, command):
    assert kesi.classify_command(command)[0] == "deny"


@pytest.mark.parametrize("command", ASK)
def test_ask(project, command):
    assert kesi.classify_command(command)[0] == "ask"


@pytest.mark.parametrize("command", ALLOW)
def test_allow(project, command):
    assert kesi.classify_command(command) == ("allow", "read-only commands")


def test_deny_wins_over_metacharacters_and_order(project):
    # A hard deny hidden after a harmless, otherwise "ask" part is still a deny.
    assert kesi.classify_command("ls *.py; rm -rf ~")[0] == "deny"
    assert kesi.classify_command("echo $(pwd) && sudo ls")[0] == "deny"


def test_reasons_name_the_problem(project):
    assert kesi.classify_command("pytest -q")[1] == "pytest is not on the read-only list"
    assert "git push" in kesi.classify_command("git push")[1]
    assert "shell" in kesi.classify_command("ls *.py")[1]
    assert "path" in kesi.classify_command("cat .env")[1]
    assert "git" in kesi.classify_command("git diff --output=x")[1]
    assert "superuser" in kesi.classify_command("sudo ls")[1]


def test_command_key_is_the_exact_stripped_string():
    assert kesi.command_key("  python -m pytest -v \n") == "python -m pytest -v"
    assert kesi.command_key("   ") is None
    assert kesi.command_key(["python"]) is None
    assert kesi.command_key(None) is None


# --- check_permission: grants and modes --------------------------------------------

def test_hard_deny_never_asks_even_in_bypass_mode(project, user, monkeypatch):
    person = user("y", "y")
    for mode in kesi.PERMISSION_MODES:
        monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
        allowed, refusal = kesi.check_permission("run_command", {"command": "rm -rf ~"})
        assert not allowed and refusal == kesi.HARD_DENY_TEXT.format("it would delete the root folder, a system folder or a home folder")
    assert person.asked == []


def test_always_saves_the_rule_it_showed_and_nothing_wider(project, user):
    person = user("a", "n", "n", "n")
    assert kesi.check_permission("run_command", {"command": "python -m pytest -v"}) == (True, None)
    assert kesi.check_permission("run_command", {"command": " python -m pytest -q "}) == (True, None)
    for other in ("python -m pytest -v && rm x", "python cleanup.py", "python -m pip install x"):
        assert kesi.check_permission("run_command", {"command": other}) == (False, kesi.USER_REFUSED)
    assert [r.text for r in kesi.permission_rules()] == ["Bash(python -m pytest:*)"] and not kesi.GRANTED_COMMANDS
    assert len(person.asked) == 4
    first = person.questions[0]
    assert (first.detail, first.reason, first.always) == (
        "run command: python -m pytest -v", "python is not on the read-only list", "Bash(python -m pytest:*)")
    assert person.questions[1].reason == "`rm x`: rm is not on the read-only list"


def test_y_allows_once_only(project, user):
    person = user("y", "n")
    assert kesi.check_permission("run_command", {"command": "pytest -q"})[0]
    assert not kesi.check_permission("run_command", {"command": "pytest -q"})[0]
    assert len(person.asked) == 2 and not kesi.GRANTED_COMMANDS


def test_write_grant_is_per_path_and_shared_by_both_tools(project, user):
    person = user("a", "n")
    assert kesi.check_permission("edit_file", {"file_path": "rules.py"}) == (True, None)
    assert kesi.check_permission("write_file", {"file_path": "./rules.py"}) == (True, None)
    assert kesi.check_permission("write_file", {"file_path": "test_rules.py"}) == (False, kesi.USER_REFUSED)
    assert [r.text for r in kesi.permission_rules()] == ["Edit(rules.py)"]
    assert person.asked == ["edit_file wants to change rules.py",
                                             "write_file wants to create test_rules.py"]


def test_read_only_tools_never_ask(project, user):
    person = user()
    for tool in ("read_file", "list_files", "glob", "grep", "todo_write", "task"):
        assert kesi.check_permission(tool, {"file_path": ".env"}) == (True, None)
    assert person.asked == []


def test_read_only_mode_refuses_without_asking(project, user, monkeypatch):
    person = user("y")
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    allowed, refusal = kesi.check_permission("write_file", {"file_path": "new.py"})
    assert not allowed and "read-only mode" in refusal
    allowed, refusal = kesi.check_permission("run_command", {"command": "pytest -q"})
    assert not allowed and "read-only mode" in refusal
    assert kesi.check_permission("run_command", {"command": "git status"}) == (True, None)
    assert person.asked == []


@pytest.mark.parametrize("mode", ["readOnly", "plan"])
def test_a_grant_for_the_session_is_set_aside_in_a_read_only_mode(project, user, monkeypatch, mode):
    """rt36d 13, 15, 16: an `a` answer (a command, or leaving the sandbox, for this session) still ran the command
    unasked after /mode readOnly or /mode plan, in the foreground or as a background task. Like allow rules, such
    grants do not count there; they count again when the mode allows commands."""
    person = user()
    kesi.GRANTED_COMMANDS.add("python3 w.py")
    kesi.grant_escalation("date", "unsandboxed", True)
    kesi.grant_escalation("python3 loop.py", "network", True)
    monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
    for call in ({"command": "python3 w.py"}, {"command": "python3 w.py", "run_in_background": True},
                 {"command": "date", "escalate": "unsandboxed"}, {"command": "python3 loop.py", "escalate": "network"},
                 {"command": "python3 loop.py", "run_in_background": True}):
        allowed, refusal = kesi.check_permission("run_command", call)
        assert not allowed and kesi.READ_ONLY_MODES[mode] in refusal, (call, refusal)
    assert person.asked == []
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "default")
    assert kesi.check_permission("run_command", {"command": "python3 w.py"}) == (True, None)
    assert kesi.check_permission("run_command", {"command": "date", "escalate": "unsandboxed"}) == (True, None)
    assert person.asked == []


def test_accept_edits_still_asks_for_commands(project, user, monkeypatch):
    person = user("n")
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    assert kesi.check_permission("edit_file", {"file_path": "rules.py"}) == (True, None)
    assert kesi.check_permission("run_command", {"command": "pytest -q"}) == (False, kesi.USER_REFUSED)
    assert len(person.asked) == 1


def test_bypass_runs_ask_commands_without_asking(project, user, monkeypatch):
    person = user()
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "bypassPermissions")
    assert kesi.check_permission("run_command", {"command": "pytest -q"}) == (True, None)
    assert kesi.check_permission("write_file", {"file_path": "x.py"}) == (True, None)
    assert person.asked == []


def test_bad_write_path_is_left_to_the_tool(project, user):
    """No prompt for a path the tool will refuse anyway, and the tool does refuse."""
    person = user()
    results, _ = kesi.run_tools([{"type": "tool_use", "id": "t1", "name": "write_file",
                                  "input": {"file_path": "../escape.txt", "content": "x"}}], kesi.MAIN_AGENT)
    assert results[0]["is_error"] and person.asked == []
    assert not (project.parent / "escape.txt").exists()


# --- ask_user itself ---------------------------------------------------------------

class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("typed, expected", [
    (["y"], (True, False)), (["YES "], (True, False)), (["a"], (True, True)), ([" Always"], (True, True)),
    (["n"], (False, "")), ([""], (False, "")), (["sure", "y"], (True, False)), (["ok", "n"], (False, "")),
    ([EOFError], (False, "")), (["n  use pytest -x "], (False, "use pytest -x")), (["y then", "y"], (True, False)),
])
def test_ask_user_answers(monkeypatch, typed, expected):
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    monkeypatch.setattr(sys, "stdin", FakeTerminal())
    answers = list(typed)

    def fake_input(prompt=""):
        assert prompt == ""                  # the question itself goes through ui(), not stdout
        answer = answers.pop(0)
        if isinstance(answer, type):
            raise answer
        return answer

    monkeypatch.setattr(builtins, "input", fake_input)
    assert kesi.ask_user(kesi.Question("run command: pytest -q", "pytest is not on the read-only list",
                                       always="Bash(pytest:*)")) == expected
    assert not answers                       # an answer it does not understand is asked again
    assert "[permission needed] run command: pytest -q" in shown.getvalue()
    assert "reason: pytest is not on the read-only list" in shown.getvalue()
    question = "Allow? [y = yes / a = yes, and don't ask again: Bash(pytest:*) / n = no"
    assert shown.getvalue().count(question) == len(typed)


def test_ask_user_fails_closed_without_a_terminal(monkeypatch):
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    monkeypatch.setattr(sys, "stdin", io.StringIO("y\n"))
    monkeypatch.setattr(builtins, "input", lambda prompt="": pytest.fail("must not prompt"))
    assert kesi.ask_user(kesi.Question("edit_file wants to change a.py")) == (False, "")
    assert "nobody to ask" in shown.getvalue() and "reason:" not in shown.getvalue()


# --- a refused call inside a batch -------------------------------------------------

def test_refusals_are_error_results_and_the_batch_goes_on(project, user, mock_client, monkeypatch):
    person = user("n")
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    batch = reply("Clean, test, read.", tool_call("run_command", {"command": "rm -rf /"}),
                  tool_call("run_command", {"command": "pytest -q"}),
                  tool_call("read_file", {"file_path": "rules.py"}))
    mock, client = mock_client([batch, reply("Done.")])
    kesi.MAIN_AGENT.echo = False
    answer = kesi.run_agent(client, [{"role": "user", "content": "go"}])
    assert answer.text == "Done." and answer.ok
    results = mock.requests[1]["body"]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [True, True, False]
    assert "blocked by a safety rule" in results[0]["content"]
    assert results[1]["content"] == kesi.USER_REFUSED
    assert "x = 1" in results[2]["content"]
    assert len(person.asked) == 1
    assert kesi.UI.getvalue().count("[blocked]") == 2


# --- headless runs: --permission-mode ----------------------------------------------
# The four modes run as kesi.py -p children at the same time (each with its
# own workspace and mock); the tests below read what each one did.

EDIT_AND_RUN = [reply("Writing and touching.",
                      tool_call("write_file", {"file_path": "new.txt", "content": "hi\n"}),
                      tool_call("run_command", {"command": "touch made.txt"}),
                      tool_call("run_command", {"command": "ls"})),
                reply("Finished.")]
BYPASS = [reply("Go.", tool_call("run_command", {"command": "touch made.txt"}),
                tool_call("run_command", {"command": "rm -rf ~"}),
                tool_call("run_command", {"command": "sudo touch root.txt"})),
          reply("Finished.")]


@dataclass
class HeadlessRun:
    ws: Path
    mock: MockAPI
    proc: subprocess.CompletedProcess

    def results(self):
        """The tool results KeSi sent back after the first reply."""
        return self.mock.requests[1]["body"]["messages"][-1]["content"]


@pytest.fixture(scope="module")
def headless(tmp_path_factory):
    fake_home = tmp_path_factory.mktemp("home")
    (fake_home / "canary.txt").write_text("still here\n")
    plans = {"default": (EDIT_AND_RUN, {}), "acceptEdits": (EDIT_AND_RUN, {}),
             "readOnly": (EDIT_AND_RUN, {}), "bypassPermissions": (BYPASS, {"HOME": str(fake_home)})}
    with contextlib.ExitStack() as stack:
        started = {}
        for mode, (script, extra) in plans.items():
            mock = stack.enter_context(MockAPI(list(script)))
            ws = tmp_path_factory.mktemp(f"ws-{mode}").resolve()
            args = [sys.executable, KESI, "-p", "do it"] + ([] if mode == "default" else ["--permission-mode", mode])
            proc = subprocess.Popen(args, cwd=ws, env=child_env(mock, **extra), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            started[mode] = (ws, mock, proc)
        runs = {}
        for mode, (ws, mock, proc) in started.items():
            out, err = proc.communicate(timeout=90)
            runs[mode] = HeadlessRun(ws, mock, subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
        runs["fake_home"] = fake_home
        yield runs


def test_headless_default_refuses_edits_and_commands(headless):
    run = headless["default"]
    assert run.proc.returncode == 0 and run.proc.stdout.strip() == "Finished.", run.proc.stderr
    assert not (run.ws / "new.txt").exists() and not (run.ws / "made.txt").exists()
    assert [r["is_error"] for r in run.results()] == [True, True, False]
    assert run.proc.stderr.count("nobody to ask") == 2


def test_headless_accept_edits_edits_but_asks_for_commands(headless):
    run = headless["acceptEdits"]
    assert run.proc.returncode == 0, run.proc.stderr
    assert (run.ws / "new.txt").read_text() == "hi\n" and not (run.ws / "made.txt").exists()
    assert [r["is_error"] for r in run.results()] == [False, True, False]


def test_headless_read_only_refuses_without_asking(headless):
    run = headless["readOnly"]
    assert run.proc.returncode == 0, run.proc.stderr
    assert not (run.ws / "new.txt").exists() and not (run.ws / "made.txt").exists()
    results = run.results()
    assert [r["is_error"] for r in results] == [True, True, False]
    assert all("read-only mode" in r["content"] for r in results[:2])
    assert "nobody to ask" not in run.proc.stderr


def test_headless_bypass_runs_commands_but_not_hard_denials(headless):
    run = headless["bypassPermissions"]
    assert run.proc.returncode == 0, run.proc.stderr
    assert (run.ws / "made.txt").exists() and (headless["fake_home"] / "canary.txt").exists()
    assert not (run.ws / "root.txt").exists()
    results = run.results()
    assert [r["is_error"] for r in results] == [False, True, True]
    assert all("blocked by a safety rule" in r["content"] for r in results[1:])


def test_unknown_permission_mode_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        kesi.parse_args(["-p", "hi", "--permission-mode", "yolo"])
    assert stop.value.code == 2 and "invalid choice: 'yolo'" in capsys.readouterr().err


def test_permission_modes_are_documented(capsys):
    assert kesi.parse_args(["-p", "hi"]).permission_mode == "default"     # safe by default
    with pytest.raises(SystemExit):
        kesi.parse_args(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    assert "--permission-mode {default,auto,acceptEdits,readOnly,bypassPermissions,plan}" in usage
    assert "refuse when nobody can answer" in usage


# --- the real prompt over a pseudo-terminal ---------------------------------------

def test_real_prompt_over_a_pty(ws, mock_client):
    command = "touch made-by-kesi.txt"
    turn = [reply(tool_call("run_command", {"command": command})), reply("ok")]
    mock, _ = mock_client(turn * 6)
    with Terminal([sys.executable, KESI], ws, child_env(mock, TERM="dumb")) as term:
        term.expect("sandbox:")
        term.expect("you > ")
        # None: the saved rule allows it, so no prompt; "\x04" is Ctrl-D (EOF). Ctrl-C: test_permission_flow.py
        answers = ["y\n", "n run ls instead\n", "\x04", "a\n", None]
        for number, answer in enumerate(answers, start=1):
            term.type(f"turn {number}\n")
            if answer is not None:
                term.expect("[permission needed] run command: touch made-by-kesi.txt")
                term.expect("Allow? [y = yes / a = yes, and don't ask again: Bash(touch made-by-kesi.txt:*) / n = no")
                term.type(answer)
            term.expect("KeSi > ok")
            term.expect("you > ")
            if number == 5:
                term.type("/permissions\n")
                listing = term.expect("you > ")
                assert "allow Bash(touch made-by-kesi.txt:*)   from user settings, this project" in listing[-300:]
        term.type("/exit\n")
        term.close()
    assert term.proc.returncode == 0
    prompts = term.seen.count("Allow? [")
    assert prompts == 4, term.seen
    # Requests 2, 4, ... 10 carry the tool result of turns 1-5.
    results = [mock.requests[n]["body"]["messages"][-1]["content"][0] for n in (1, 3, 5, 7, 9)]
    assert [r["is_error"] for r in results] == [False, True, True, False, False], json.dumps(results)[:2000]
    assert results[1]["content"] == kesi.USER_REFUSED + " The user says what to do instead: run ls instead"
    assert results[2]["content"] == kesi.USER_REFUSED
    assert (ws / "made-by-kesi.txt").exists()


# --- one grant key per file, however it is spelled ------------------------------------------------

def test_split_rm_root_is_refused_even_in_bypass_mode(ws, monkeypatch, user):
    person = user(then="y")          # says yes to any question
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "bypassPermissions")
    allowed, refusal = kesi.check_command_permission("r\\\nm -rf /")
    assert not allowed
    assert "safety rule" in refusal
    assert person.asked == []


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


# --- auto mode: the sandbox is the boundary ------------------------------------------

def test_auto_mode_runs_commands_in_the_sandbox_without_asking(box, user, monkeypatch, notices):
    person, decisions = user(), []
    real_note = kesi.note_approval
    monkeypatch.setattr(kesi, "note_approval", lambda command, decision, *rest: (
        decisions.append(decision), real_note(command, decision, *rest)))
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "auto")
    for command in ("npm test && npm run lint", "python3 -c 'print(1)'", "touch made.txt > log", "cd src && ls"):
        assert kesi.check_permission("run_command", {"command": command}) == (True, None), command
    assert kesi.check_permission("write_file", {"file_path": "new.py"}) == (True, None)
    assert not kesi.check_permission("run_command", {"command": "sudo ls"})[0]     # hard denials stay hard
    assert not kesi.check_permission("write_file", {"file_path": ".envrc"})[0]      # runs later: asks (and no)
    assert not kesi.check_permission("run_command", {"command": "ls", "escalate": "network"})[0]   # leaving asks
    assert person.asked == ["write_file wants to create .envrc",
                            "run command with this machine's network and its local services (files still sandboxed): ls"]
    kesi.run_tools([tool_use("t1", "run_command", {"command": "touch made.txt"})])
    assert (box / "made.txt").exists() and decisions[-1] == "allowed in the sandbox (auto mode)"


@pytest.mark.parametrize("mode", ["auto", "acceptEdits"])
def test_file_tools_ask_before_what_the_sandbox_keeps_read_only_for_git(box, user, monkeypatch, notices, mode):
    """Red team rt22b: edit_file wrote the core.hooksPath folder and an included config without a question."""
    for args in (["init", "-q"], ["config", "core.hooksPath", "tools/hooks"], ["config", "include.path", "../git.inc"],
                 ["config", "core.fsmonitor", "tools/fsmon.sh"]):          # rt22c: a program config names
        subprocess.run(["git", *args], cwd=box, check=True, capture_output=True)
    (box / "tools" / "hooks").mkdir(parents=True)
    (box / "tools" / "hooks" / "pre-commit").write_text("#!/bin/sh\nexit 0\n")
    (box / "tools" / "fsmon.sh").write_text("#!/bin/sh\n")
    (box / "git.inc").write_text("[alias]\n\tst = status\n")
    person = user()
    monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
    for path in ("tools/hooks/pre-commit", "tools/hooks/pre-push", "git.inc", "tools/fsmon.sh"):
        tool = "write_file" if path.endswith("push") else "edit_file"
        assert not kesi.check_permission(tool, {"file_path": path})[0], path
        output, _ = kesi.run_command(f"echo 'touch PWNED' >> {path}; echo tried", timeout=30)
        assert "tried" in output and not (box / "PWNED").exists(), output
    assert kesi.check_permission("edit_file", {"file_path": "tools/other.sh"}) == (True, None)
    assert person.asked == ["edit_file wants to change tools/hooks/pre-commit", "write_file wants to create "
                            "tools/hooks/pre-push", "edit_file wants to change git.inc",
                            "edit_file wants to change tools/fsmon.sh"]
    assert "PWNED" not in (box / "git.inc").read_text() + (box / "tools" / "hooks" / "pre-commit").read_text() \
        + (box / "tools" / "fsmon.sh").read_text()


def test_auto_mode_without_a_sandbox_asks_and_says_so_at_start_up(ws, mock_client):
    mock, _ = mock_client([reply(tool_call("run_command", {"command": "touch x"})), reply("done")])
    proc = subprocess.run([sys.executable, KESI, "-p", "go", "--permission-mode", "auto"], cwd=ws,
                          env=child_env(mock, KESI_SANDBOX="off"), capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert "(auto mode needs the sandbox, which is off here: KeSi asks as in default mode)" in proc.stderr
    assert "nobody to ask: refused" in proc.stderr and not (ws / "x").exists()


def test_a_write_question_and_its_preview_fit_on_the_screen(notices, monkeypatch):
    """rt38c 9: 30 preview lines of 380 characters scrolled the file's name, the reason and line 1 off a 40-row
    screen; now the preview stops where the screen would, and `d` shows the rest and the question again."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 100)
    monkeypatch.setenv("LINES", "40")
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    answers = iter(["d", "n"])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    diff = "\n".join(["@@ -0,0 +1,30 @@", "+touch PWNED  # fetch the certificates"] + ["+# " + "x" * 377] * 29)
    question = kesi.Question("write_file wants to create .envrc", kesi.RUNS_LATER_REASON, diff)
    assert kesi.ask_user(question) == (False, "")
    shown = notices.getvalue().splitlines()
    first_screen = shown[:shown.index(next(line for line in shown if "more diff lines: answer d" in line)) + 1]
    assert len(first_screen) <= 40 - 3 and "+touch PWNED" in "\n".join(first_screen), first_screen
    assert shown[-2].startswith("      [permission needed] write_file wants to create .envrc"), shown[-3:]


def test_a_preview_cut_in_both_ways_says_both(notices):
    """rt38c 31: with more lines than shown, a line cut at 400 characters went unsaid."""
    assert kesi.show_diff("\n".join(["+" + "x" * 500] + ["+y"] * 40), 30)
    assert "(11 more diff lines, lines cut at 400 characters: answer d to see it all)" in notices.getvalue()


def test_a_question_taller_than_the_screen_says_so_and_shows_its_first_line_again(notices, monkeypatch):
    """rt38e 3: `rm -rf "$PWD/src";` then 18,000 spaces: the question's head scrolled off, a harmless tail stayed."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 100)
    monkeypatch.setenv("LINES", "40")
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt="": "n")
    command = 'npm run build; rm -rf "$PWD/src";' + " " * 18_000 + "echo build finished"
    assert kesi.ask_user(kesi.Question(f"run command: {command}", "it is long")) == (False, "")
    shown = notices.getvalue()
    assert 'rm -rf "$PWD/src"; <18,000 spaces> echo build' in shown, shown      # a run of blanks counted
    command = "\n".join(f"echo step {n}" for n in range(60)) + "\nrm -rf src"
    assert kesi.ask_user(kesi.Question(f"run command: {command}", "it is long")) == (False, "")
    note, begins, _ = notices.getvalue().splitlines()[-3:]
    assert "more than the screen shows: scroll up" in note and "run command: echo step 0" in begins, (note, begins)


def test_a_long_reason_is_cut_with_the_mark_and_draws_no_diff_row(notices, monkeypatch):
    """rt38e 23: a hook's ask reason padded with spaces wrapped onto rows with the diff's bare indent."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 100)
    reason = "a PreToolUse hook asks: review:" + " " * 95 + "@@ -1 +0,0 @@" + " " * 95 + "-touch PWNED"
    kesi.ask_user(kesi.Question("write_file wants to create a.txt", reason, "@@ -0,0 +1 @@\n+hello"))
    rows = notices.getvalue().splitlines()
    assert not [row for row in rows if row.lstrip().startswith(("@@ -1", "-touch"))], rows
    assert "        +hello" in rows, rows
