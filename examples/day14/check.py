# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 14 checks: permissions (deny -> ask -> allow, grants, fail closed).

Every verdict comes from KeSi's real classify_command / check_permission.
The person at the keyboard is replaced by a scripted answerer, except in
the fail-closed check, which uses the real ask_user with no terminal.
The batch check runs the real agent loop against the mock API.

Run: uv run examples/day14/check.py
"""
import io
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, ScriptedUser, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

EXPECTED = {
    "allow": ["ls", "ls -la", "git status", "cat README.md", "ls; pwd"],
    "ask": ["pytest -q", "git push", "rm -rf build", "ls *.py", "cat $(ls)", "echo hi > file.txt"],
    "deny": ["sudo ls", "rm -rf /", "rm -rf ~", "rm -rf $HOME", "ls; sudo rm -rf /"],
}
HOME = kesi.HOME_DIR
SNEAKY_DENIALS = [
    f"rm -rf {HOME}", f"rm -rf {HOME}/", f"rm -rf {HOME}/*", "rm -rf ${HOME}", "rm -rf ~/*",
    "rm -rf /*", "rm -rf /root", "echo ok\nrm -rf /", "env rm -rf /", "sh -c 'rm -rf /'",
    "bash -c 'ls; rm -rf ~'", "env FOO=1 sudo ls",
]
PROJECT = {
    "README.md": "# demo\n",
    "rules.py": "def score(x):\n    return x + 1\n",
    "test_rules.py": "from rules import score\n\ndef test_score():\n    assert score(1) == 2\n",
    ".env": "API_KEY=sk-secret\n",
    "config/.env": "DB=secret\n",
    ".env.local": "TOKEN=secret\n",
    ".git/config": "[remote]\n",
    "src/app.py": "print('app')\n",
}


def permit(user, name, tool_input):
    """check_permission with `user` at the keyboard; returns (allowed, refusal)."""
    kesi.ask_user = user
    try:
        return kesi.check_permission(name, tool_input)
    finally:
        kesi.ask_user = REAL_ASK_USER


def command(user, text):
    return permit(user, "run_command", {"command": text})


REAL_ASK_USER = kesi.ask_user
checks = Checks("Day 14: permissions")

with workspace(PROJECT) as root:
    outside = Path(tempfile.mkdtemp(prefix="kesi-outside-"))
    (outside / "notes.txt").write_text("outside\n")
    (root / "outside-link").symlink_to(outside / "notes.txt")

    # 1-3: classification
    wrong = [(c, kesi.classify_command(c)[0], want) for want, cases in EXPECTED.items()
             for c in cases if kesi.classify_command(c)[0] != want]
    total = sum(len(v) for v in EXPECTED.values())
    checks.check(f"every command gets the right verdict ({total} cases)", not wrong, wrong)
    verdicts = [kesi.classify_command(c)[0] for c in ("git diff --output report.txt",
                                                       "git diff --output=report.txt")]
    checks.check("git diff --output is not treated as read-only", verdicts == ["ask", "ask"], verdicts)
    checks.check("a read-only command following a symlink out of the workspace asks",
                 kesi.classify_command("cat outside-link")[0] == "ask",
                 kesi.classify_command("cat outside-link"))

    # 4-6: hard denials never reach the user
    user = ScriptedUser("y", "y", "y")
    allowed, refusal = command(user, "rm -rf /")
    checks.check("rm -rf / is refused without asking, even by someone who would say y",
                 not allowed and not user.asked and refusal.startswith("Error: this was blocked"),
                 (allowed, refusal, user.asked))
    allowed, refusal = command(user, "sudo ls")
    checks.check("sudo is refused outright", not allowed and not user.asked and "superuser" in refusal,
                 (allowed, refusal))
    leaks = [c for c in SNEAKY_DENIALS if kesi.classify_command(c)[0] != "deny"]
    checks.check("the real home path, newlines and env / sh -c wrappers cannot slip past the hard deny",
                 not leaks, leaks)

    # 7: read-only work never prompts
    user = ScriptedUser()
    results = [permit(user, tool, {"file_path": "rules.py", "pattern": "score", "path": "."})[0]
               for tool in ("read_file", "list_files", "glob", "grep")]
    results += [command(user, c)[0] for c in ("ls -la", "git status", "cat README.md", "git log -3")]
    checks.check("read-only tools and read-only commands run without a prompt",
                 all(results) and not user.asked, (results, user.asked))

    # 8-13: "a" saves the rule the question showed, for this kind of command; compound commands go part by part
    user = ScriptedUser("a")
    first = command(user, "python -m pytest -v")[0]
    again = command(user, "python -m pytest -q")[0]
    checks.check("the same kind of command is not asked about again", first and again and len(user.asked) == 1,
                 user.asked)
    checks.check("the rule was shown before it was saved", user.questions[0].always == "Bash(python -m pytest:*)",
                 user.questions[0])
    user = ScriptedUser("n", "a")
    command(user, "python -m pytest -v && rm -rf build")
    checks.check("a compound command with an unapproved part asks, naming that part (pytest is not rm)",
                 len(user.asked) == 1 and user.questions[0].reason == "`rm -rf build`: rm is not on the read-only list",
                 user.questions)
    command(user, "python setup.py build && python -m pytest -v")
    again = command(user, "python -m pytest -v && python setup.py build")[0]
    checks.check("each part is judged on its own: two rules cover both orders", again and len(user.asked) == 2,
                 user.asked)
    rules = [rule.text for rule in kesi.permission_rules()]
    checks.check("the saved rules are the ones shown", rules == ["Bash(python -m pytest:*)", "Bash(python setup.py:*)"],
                 rules)
    user = ScriptedUser("a", "a", "n", "n")
    command(user, "git push")
    command(user, "rm build")
    command(user, "git clean -fdx")
    command(user, "rm important")
    checks.check("granting git push / rm build does not grant git clean / rm important",
                 len(user.asked) == 4, user.asked)

    # 14-15: secrets ask, ordinary files do not
    secret_reads = ["cat .env", "cat config/.env", "cat .env.local", "head -5 .git/config"]
    verdicts = {c: kesi.classify_command(c)[0] for c in secret_reads}
    checks.check("cat .env and friends are not auto-allowed (all four ask)",
                 set(verdicts.values()) == {"ask"}, verdicts)
    verdicts = {c: kesi.classify_command(c)[0] for c in ("cat README.md", "head -5 src/app.py", "wc -l rules.py")}
    checks.check("ordinary files are still auto-allowed", set(verdicts.values()) == {"allow"}, verdicts)

    # 16-17: file grants are per path, shared by edit_file and write_file
    user = ScriptedUser("a", "n")
    edit = {"file_path": "rules.py", "old_string": "x + 1", "new_string": "x + 2"}
    permit(user, "edit_file", edit)
    again = permit(user, "edit_file", edit)[0]
    rewrite = permit(user, "write_file", {"file_path": "./rules.py", "content": "x"})[0]
    checks.check("the same file is asked about once (edit_file and write_file alike)",
                 again and rewrite and len(user.asked) == 1, user.asked)
    permit(user, "edit_file", {"file_path": "test_rules.py", "old_string": "== 2", "new_string": "== 3"})
    checks.check("another file asks again (rules.py does not grant test_rules.py)",
                 len(user.asked) == 2 and "test_rules.py" in user.asked[-1], user.asked)

    # 18: the real ask_user with nobody at the keyboard
    saved_stdin, saved_ui = sys.stdin, kesi.UI
    sys.stdin, kesi.UI = io.StringIO("y\n"), io.StringIO()
    try:
        answer = kesi.ask_user(kesi.Question("run command: pytest", "pytest is not on the read-only list"))
        kesi.PERMISSION_MODE = "default"
        refused = kesi.check_permission("write_file", {"file_path": "new.py", "content": ""})
    finally:
        sys.stdin, shown = saved_stdin, kesi.UI.getvalue()
        kesi.UI = saved_ui
    checks.check("with no terminal the prompt fails closed (a piped 'y' is not a person)",
                 answer == (False, "") and refused == (False, kesi.USER_REFUSED) and "nobody to ask" in shown,
                 (answer, refused, shown))

    # 19-20: a refused call is one is_error result; the rest of the batch runs
    if kesi.classify_command("rm -rf /")[0] != "deny":      # never hand this to a shell
        checks.check("batch of three calls (skipped: rm -rf / is not hard-denied)", False)
    else:
        batch = reply("Cleaning up, testing, reading.",
                      tool_call("run_command", {"command": "rm -rf /"}),
                      tool_call("run_command", {"command": "pytest -q"}),
                      tool_call("read_file", {"file_path": "rules.py"}))
        user = ScriptedUser("n")
        kesi.ask_user = user
        try:
            with mock_client([batch, reply("Done.")]) as (mock, client):
                kesi.MAIN_AGENT.echo = False
                kesi.UI = io.StringIO()
                kesi.run_agent(client, [{"role": "user", "content": "clean up and test"}])
                kesi.UI = saved_ui
                sent = mock.requests[1]["body"]["messages"][-1]["content"]
        finally:
            kesi.ask_user = REAL_ASK_USER
        results = [b for b in sent if b.get("type") == "tool_result"]
        checks.check("a batch of three calls gets three results", len(results) == 3, sent)
        errors = [r["is_error"] for r in results]
        read_text = str(results[2]["content"]) if len(results) == 3 else ""
        checks.check("the two refused calls are errors and the read runs",
                     errors == [True, True, False] and "return x + 1" in read_text
                     and "blocked by a safety rule" in str(results[0]["content"])
                     and str(results[1]["content"]) == kesi.USER_REFUSED
                     and user.asked == ["run command: pytest -q"], (errors, results, user.asked))

    # 21: /permissions shows the grants, /revoke clears them
    kesi.UI = io.StringIO()
    kesi.handle_slash("/permissions", None, [])
    listed = kesi.UI.getvalue()
    kesi.handle_slash("/revoke", None, [])
    kesi.UI = io.StringIO()
    kesi.handle_slash("/permissions", None, [])
    after = kesi.UI.getvalue()
    kesi.UI = saved_ui
    checks.check("grants are listed by /permissions and cleared by /revoke",
                 "git push" in listed and "rules.py" in listed
                 and not kesi.GRANTED_COMMANDS and not kesi.GRANTED_WRITES and "none" in after,
                 (listed, after))
    os.unlink(outside / "notes.txt")
    outside.rmdir()

sys.exit(checks.finish())
