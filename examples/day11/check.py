# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3", "pytest"]
# ///
"""Day 11 checks: run_command (process groups, timeouts, capped output).

Real shell commands in a temporary workspace, no key, no model. The checks
that depend on how the command is launched run twice: with the OS sandbox
off and, if bubblewrap/sandbox-exec works here, with it on. The last two
checks are the chapter's deliberate "failure" demo: without the sandbox the
shell ignores the file tools' fence; with it, the fence holds.
Run: uv run examples/day11/check.py
"""
import os
import re
import shutil
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, workspace, unique_sleep, started_commands, left_behind   # noqa: E402
import kesi                                                                          # noqa: E402

checks = Checks("Day 11: run_command")
# Short limits keep the check fast; run_command reads both at call time.
kesi.COMMAND_TIMEOUT = 1
kesi.KILL_GRACE_SECONDS = 1
# Our processes are found by their process group and by sleeps no other run
# on this machine has (another copy of these checks may be running).
ORPHAN_SLEEP, BACKGROUND_SLEEP, LONG_SLEEP = unique_sleep(), unique_sleep(), unique_sleep()
# A timeout long enough that only the Ctrl-C can end that command (the sleeps last 30 s).
HANG = 25


def set_sandbox(kind) -> None:
    """Pretend the sandbox probe found kind: None (off) or 'bubblewrap'/'seatbelt'."""
    kesi.sandbox_kind = lambda: kind


def interrupt_me_after(seconds: float) -> threading.Timer:
    """Ctrl-C, as the terminal would send it: SIGINT to this process."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def basic_checks(tag: str) -> None:
    with workspace() as root:
        checks.check(f"[{tag}] 1. echo and exit code 0",
                     kesi.run_command("echo hello") == ("hello\n(exit code 0)", False))
        out, err = kesi.run_command("exit 3")
        checks.check(f"[{tag}] 2. a non-zero exit code is an error", err and out.endswith("(exit code 3)"), out)
        out, _ = kesi.run_command("echo one; echo two >&2; echo three")
        checks.check(f"[{tag}] 3. stdout and stderr share one pipe, in order",
                     out.startswith("one\ntwo\nthree\n"), out)
        checks.check(f"[{tag}] 4. no output is said plainly",
                     kesi.run_command("true") == ("(no output)(exit code 0)", False))
        out, _ = kesi.run_command("printf '   '")
        checks.check(f"[{tag}] 5. whitespace-only output is kept", out.startswith("   "), repr(out))
        refused = [kesi.run_command(c) for c in ("", "   ")]
        checks.check(f"[{tag}] 6. an empty command is refused",
                     all(err and "must not be empty" in out for out, err in refused), refused)
        out, _ = kesi.run_command("pwd")
        checks.check(f"[{tag}] 7. cwd is the working directory", out.startswith(f"{root}\n"), out)
        kesi.run_command("mkdir -p sub && cd sub")
        out, _ = kesi.run_command("pwd")
        checks.check(f"[{tag}] 8. cd does not carry over to the next call", out.startswith(f"{root}\n"), out)
        os.environ.update(ANTHROPIC_API_KEY="sk-ant-check", GITHUB_TOKEN="ghp-check")
        try:
            out, _ = kesi.run_command("echo [$ANTHROPIC_API_KEY][$GITHUB_TOKEN]")
        finally:
            del os.environ["ANTHROPIC_API_KEY"], os.environ["GITHUB_TOKEN"]
        checks.check(f"[{tag}] 9. the child sees no API key or token", out.startswith("[][]"), out)
        out, err = kesi.run_command("read x; echo got=[$x]")
        checks.check(f"[{tag}] stdin is closed: read gets nothing at once", out.startswith("got=[]") and not err, out)
        pipeline = kesi.run_command("exit 1 | tail -1")
        checks.check(f"[{tag}] a normal end is reported as such: a pipeline reports its last exit code",
                     pipeline == ("(no output)(exit code 0)", False), pipeline)


def process_checks(tag: str) -> None:
    with workspace() as root:
        with started_commands() as started:
            out, err = kesi.run_command(f"({ORPHAN_SLEEP}; echo alive > orphan.txt) & "
                                        f"echo thrown; {LONG_SLEEP}")
        checks.check(f"[{tag}] 10. a timeout stops the command and says so",
                     err and "thrown\n" in out and "did not finish within 1 s" in out, out)
        left = left_behind(started, [ORPHAN_SLEEP, LONG_SLEEP])
        checks.check(f"[{tag}] 11. background jobs of sh are gone too", not left, left)
        checks.check(f"[{tag}] no orphan.txt appears after the timeout", not (root / "orphan.txt").exists())

        with started_commands() as started:
            out, err = kesi.run_command(f"{BACKGROUND_SLEEP} & echo started")
        left = left_behind(started, [BACKGROUND_SLEEP])
        checks.check(f"[{tag}] 12. a normal exit leaves no background job either",
                     out == "started\n(exit code 0)" and not err and not left, (out, left))

        # The background shell traps TERM and needs 0.4 s to finish. sh itself
        # dies at once, so only a grace period for the whole group lets it finish.
        out, err = kesi.run_command("(trap 'sleep 0.4; echo tidy > graceful.txt; exit 0' TERM; "
                                    "while :; do sleep 0.05; done) & sleep 0.2; echo started")
        checks.check(f"[{tag}] 13. the SIGTERM grace waits for the whole process group",
                     (root / "graceful.txt").exists() and out.startswith("started"), out)
        # One member ignores TERM; another notes the TERM in a file and goes on
        # living. Both are gone afterwards: TERM came first, then the KILL.
        with started_commands() as started:
            kesi.run_command(f"(trap '' TERM; {LONG_SLEEP}) & "
                             "(trap 'echo term > term.txt' TERM; while :; do sleep 0.05; done) & "
                             "sleep 0.2; echo started")
        left = left_behind(started, [LONG_SLEEP])
        checks.check(f"[{tag}] a group that outlives SIGTERM is killed after the grace",
                     (root / "term.txt").exists() and not left, left)

        # Only the Ctrl-C may end this one: on a busy machine the 1 s timeout
        # could come first, so it is lifted for this call.
        timer, interrupted, kesi.COMMAND_TIMEOUT = interrupt_me_after(0.3), False, HANG
        try:
            with started_commands() as started:
                kesi.run_command(f"{LONG_SLEEP} & {LONG_SLEEP}")
        except KeyboardInterrupt:
            interrupted = True
        finally:
            timer.cancel()
            kesi.COMMAND_TIMEOUT = 1
        left = left_behind(started, [LONG_SLEEP])
        checks.check(f"[{tag}] 14. Ctrl-C still clears the command's own session", interrupted and not left, left)
        out, err = kesi.run_command(LONG_SLEEP, timeout=1)
        checks.check(f"[{tag}] the model may ask for a shorter timeout", err and "within 1 s" in out, out)


def omitted(out: str) -> int:
    """The bytes the report says it left out: the cap's, plus a word cut at the tail's start (it might be half a
    credential, so it goes too)."""
    found = re.search(r"\(\.\.\. (\d+) bytes omitted", out)
    return int(found[1]) if found else -1


def output_checks() -> None:
    with workspace():
        out, err = kesi.run_command("yes kesi")
        dropped = kesi.MAX_CAPTURE_BYTES - kesi.MAX_OUTPUT_BYTES
        # The cap, not the 1 s timeout, stopped it: the report says which.
        # The series stops at 1,000,000 bytes; KeSi reads on to MAX_CAPTURE_BYTES
        # (keeping only head and tail in memory), so that an ordinary long
        # output such as `seq 1 400000` ends with its last line.
        checks.check(f"15. endless output is stopped after {kesi.MAX_CAPTURE_BYTES:,} bytes, memory bounded",
                     err and omitted(out) - dropped in range(10) and "did not finish within" not in out and
                     out.endswith(f"(output exceeded {kesi.MAX_CAPTURE_BYTES} bytes; the command was stopped)"
                                  "(killed by signal 15)(exit code -15)"), out[-160:])
        checks.check("16. the head and the tail both survive the cut",
                     out.startswith("kesi\nkesi") and "bytes omitted" in out and len(out) < 9000, len(out))
        out, err = kesi.run_command("yes 中 | head -c 9001")
        checks.check("a UTF-8 character split at the cut becomes U+FFFD, no crash",
                     not err and "\ufffd" in out and out.startswith("中\n"), out[:20])
        description = next(t for t in kesi.TOOLS if t["name"] == "run_command")["description"]
        checks.check("the tool description states no number that could go stale", "120" not in description)


def fence_checks(sandbox_kind) -> None:
    outside = Path(f"/tmp/kesi-outside-{os.getpid()}")
    outside.mkdir(exist_ok=True)
    (outside / "secret.txt").write_text("outside secret\n")
    try:
        with workspace({".env": "ANTHROPIC_API_KEY=sk-ant-from-dotenv\nSHOP_REGION=from-dotenv\n"}):
            set_sandbox(None)
            read_out, read_err = kesi.read_file(".env")
            cat_out, _ = kesi.run_command("cat .env")
            # (The key line itself comes back masked: run_command masks credential formats.)
            checks.check("17. [sandbox off] read_file refuses .env, but `cat .env` leaks it (accepted)",
                         read_err and "SHOP_REGION=from-dotenv" in cat_out, cat_out)
            out, _ = kesi.run_command(f"cat {outside}/secret.txt")
            checks.check("18. [sandbox off] the jail does not fence the shell: an outside file is readable",
                         "outside secret" in out, out)
            if sandbox_kind is None:
                checks.skip("17/18 with the sandbox on", "no usable OS sandbox here")
                return
            set_sandbox(sandbox_kind)
            cat_out, cat_err = kesi.run_command("cat .env")
            checks.check(f"17. [{sandbox_kind}] `cat .env` is blocked by the sandbox",
                         cat_err and "sk-ant" not in cat_out, cat_out)
            out, err = kesi.run_command(f"cat {outside}/secret.txt")
            checks.check(f"18. [{sandbox_kind}] the outside file is out of reach", err and "outside secret" not in out, out)
    finally:
        shutil.rmtree(outside)


def evidence_check() -> None:
    """The feedback the model needs: a red test, then green after the fix."""
    try:
        import pytest  # noqa: F401
    except ImportError:
        checks.skip("pytest evidence: red, then green", "pytest is not installed for this interpreter")
        return
    files = {"calc.py": "def add(a, b):\n    return a - b\n",
             "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"}
    pytest_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider"
    kesi.COMMAND_TIMEOUT = 60                  # pytest needs more than the 1 s used above
    with workspace(files) as root:
        red, red_err = kesi.run_command(pytest_cmd)
        (root / "calc.py").write_text("def add(a, b):\n    return a + b\n")
        green, green_err = kesi.run_command(pytest_cmd)
    checks.check("evidence: the failing test gives '1 failed' and exit code 1",
                 red_err and "1 failed" in red and red.endswith("(exit code 1)"), red[-300:])
    checks.check("evidence: after the fix '1 passed' and exit code 0",
                 not green_err and "1 passed" in green and green.endswith("(exit code 0)"), green[-300:])


REAL_SANDBOX_KIND = kesi.sandbox_kind
available = kesi.sandbox_kind()            # the real probe (KESI_SANDBOX=off turns it off)
modes = [("sandbox off", None)] + ([(available, available)] if available else [])
for tag, kind in modes:
    set_sandbox(kind)
    basic_checks(tag)
    process_checks(tag)
if not available:
    checks.skip("process checks inside the sandbox", "no usable OS sandbox here")
set_sandbox(available)
output_checks()
evidence_check()
fence_checks(available)
kesi.sandbox_kind = REAL_SANDBOX_KIND
sys.exit(checks.finish())
