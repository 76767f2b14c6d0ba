"""run_command: real /bin/sh processes, their process groups, and the report.

Tests that depend on how the command is launched run with the sandbox off
and, where bubblewrap (or sandbox-exec) works, with it on. Timeouts and the
kill grace are shortened through the module constants run_command reads at
call time.
"""
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import checklib
import kesi
from checklib import left_behind, started_commands, unique_sleep

# A guard against a hung test, never a bound asserted on: no command here takes
# this long unless it hangs (the sleeps last 30 s).
HANG = 25

AVAILABLE = kesi.probe_sandbox()
SANDBOXES = [None] + ([AVAILABLE] if AVAILABLE else [])


@pytest.fixture(params=SANDBOXES, ids=lambda kind: kind or "no-sandbox")
def shell(request, ws, monkeypatch):
    """A workspace where run_command uses the given sandbox (or none), with short limits."""
    monkeypatch.setattr(kesi, "sandbox_kind", lambda: request.param)
    monkeypatch.setattr(kesi, "COMMAND_TIMEOUT", 2)
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 0.5)
    return ws


@pytest.fixture
def plain(ws, monkeypatch):
    """A workspace without the sandbox, for tests about the report itself."""
    monkeypatch.setattr(kesi, "sandbox_kind", lambda: None)
    monkeypatch.setattr(kesi, "COMMAND_TIMEOUT", 2)
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 0.5)
    return ws


# --- the report -------------------------------------------------------------------------------

@pytest.mark.parametrize("command, expected", [
    ("echo hello", ("hello\n(exit code 0)", False)),
    ("true", ("(no output)(exit code 0)", False)),
    ("exit 7", ("(no output)(exit code 7)", True)),
    ("printf 'no newline'", ("no newline\n(exit code 0)", False)),
    ("printf '  \\n\\n'", ("  \n\n(exit code 0)", False)),
    ("exit 1 | cat", ("(no output)(exit code 0)", False)),
    ("kill -9 $$", ("(no output)(killed by signal 9)(exit code -9)", True)),
])
def test_report_formats(plain, command, expected):
    assert kesi.run_command(command) == expected


def test_stdout_and_stderr_arrive_in_one_stream_in_order(plain):
    output, _ = kesi.run_command("for i in 1 2 3; do echo out$i; echo err$i >&2; done")
    assert output.startswith("out1\nerr1\nout2\nerr2\nout3\nerr3\n")


def test_undecodable_bytes_are_replaced_not_fatal(plain):
    output, is_error = kesi.run_command("printf 'ok \\377\\376 end'")
    assert not is_error and output.startswith("ok \ufffd\ufffd end")


@pytest.mark.parametrize("command", ["", "   ", "\n\t", None, 42])
def test_empty_or_non_string_commands_are_refused(plain, command):
    output, is_error = kesi.run_command(command)
    assert is_error and "must not be empty" in output


@pytest.mark.parametrize("timeout", [0, -1, -0.5, True, "5", [3]])
def test_bad_timeouts_are_refused(plain, timeout):
    output, is_error = kesi.run_command("echo x", timeout=timeout)
    assert is_error and "timeout" in output


def test_a_shell_that_cannot_start_is_reported(plain, monkeypatch):
    monkeypatch.setattr(kesi, "SHELL_PATH", "/nonexistent/sh")
    output, is_error = kesi.run_command("echo x")
    assert is_error and "could not start" in output


# --- output limits ---------------------------------------------------------------------------------

def test_clip_output_keeps_small_output_whole():
    data = b"x" * kesi.MAX_OUTPUT_BYTES
    assert kesi.clip_output(data) == data.decode()


def test_clip_output_keeps_head_and_tail_and_counts_the_rest():
    half = kesi.MAX_OUTPUT_BYTES // 2
    data = b"H" * (half - 1) + b" " + b"M" * 2000 + b" " + b"T" * (half - 1)
    clipped = kesi.clip_output(data)
    assert clipped.startswith("H" * (half - 1) + " \n")
    assert clipped.endswith("\n " + "T" * (half - 1))
    assert f"{len(data) - kesi.MAX_OUTPUT_BYTES} bytes omitted" in clipped
    # A word cut at the head's end or the tail's start goes with the omitted bytes (it may be half a credential),
    # but no more than LINE_CUT of an unbroken run.
    data = b"H" * 5000 + b"M" * 2000 + b"T" * 5000
    clipped = kesi.clip_output(data)
    cut = kesi.LINE_CUT
    assert clipped == f"{'H' * (half - cut)}\n(... {len(data) - 2 * (half - cut)} bytes omitted ...)\n{'T' * (half - cut)}"


def test_clip_output_survives_a_character_split_at_the_cut():
    data = "中".encode() * 3000            # 9000 bytes; 4000 is not a multiple of 3
    clipped = kesi.clip_output(data)
    assert "\ufffd" in clipped and clipped.startswith("中中")


def test_drain_output_keeps_exactly_the_cap_and_reports_overflow():
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as pipe:
        writer = threading.Thread(target=lambda: (os.write(write_end, b"a" * 300_000), os.close(write_end)))
        writer.start()
        captured, full = bytearray(), []
        kesi.drain_output(pipe, captured, 100_000, on_full=lambda: full.append(True))
        writer.join()
    assert len(captured) == 100_000 and full == [True]


def test_drain_output_reads_to_the_end_below_the_cap():
    read_end, write_end = os.pipe()
    os.write(write_end, b"short")
    os.close(write_end)
    captured = bytearray()
    kesi.drain_output(os.fdopen(read_end, "rb"), captured, 100, on_full=lambda: pytest.fail("not full"))
    assert captured == b"short"


def test_endless_output_is_capped_in_memory_and_stopped(shell):
    # The 2 s timeout would also end it; the report says the cap did.
    output, is_error = kesi.run_command("yes kesi")
    assert is_error and "did not finish within" not in output
    assert output.endswith(f"(output exceeded {kesi.MAX_CAPTURE_BYTES} bytes; the command was stopped)"
                           "(killed by signal 15)(exit code -15)")
    assert omitted(output) - (kesi.MAX_CAPTURE_BYTES - kesi.MAX_OUTPUT_BYTES) in range(10)   # + the cut words
    assert output.startswith("kesi\n")


def test_long_output_runs_to_the_end_and_keeps_its_last_line(shell):
    output, is_error = kesi.run_command("seq 1 400000")
    assert not is_error and output.startswith("1\n2\n3\n")
    assert output.endswith("399999\n400000\n(exit code 0)"), output[-200:]
    printed = sum(len(str(n)) + 1 for n in range(1, 400001))
    assert omitted(output) - (printed - kesi.MAX_OUTPUT_BYTES) in range(14)


def omitted(output: str) -> int:
    """How many bytes clip_output says it left out (a word cut at either end goes with them)."""
    return int(re.search(r"\(\.\.\. (\d+) bytes omitted", output)[1])


def test_head_and_tail_keeps_both_ends_of_any_stream():
    kept = kesi.HeadAndTail(4)
    for chunk in (b"ab", b"cdef", b"g" * 50, b"xyz"):
        kept += chunk
    data, lost, _ = kept.since(0)
    assert len(kept) == 59 and kept.head == b"abcd" and data.endswith(b"gxyz") and lost + len(data) == 59


def test_large_finite_output_is_shown_head_and_tail(plain):
    output, is_error = kesi.run_command("seq 1 20000")
    assert not is_error
    assert output.startswith("1\n2\n3\n") and output.endswith("19999\n20000\n(exit code 0)")
    assert "bytes omitted" in output


# --- environment, cwd, stdin ----------------------------------------------------------------------------

def test_secrets_are_removed_from_the_environment(shell, monkeypatch):
    secrets = {"ANTHROPIC_API_KEY": "k1", "ANTHROPIC_AUTH_TOKEN": "k2", "GITHUB_TOKEN": "k3",
               "AWS_SECRET": "k4", "DB_PASSWORD": "k5", "GCP_CREDENTIALS": "k6", "OPENAI_API_KEY": "k7",
               "DATABASE_URL": "k8", "SSH_AUTH_SOCK": "k9"}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("KESI_HARMLESS", "visible")
    output, _ = kesi.run_command("env")
    names = {line.split("=", 1)[0] for line in output.splitlines()}
    assert not names & set(secrets)
    assert "KESI_HARMLESS=visible" in output and "PATH" in names


def test_cwd_is_the_workspace_and_cd_does_not_persist(shell):
    (shell / "sub").mkdir()
    assert kesi.run_command("cd sub && pwd")[0].startswith(f"{shell}/sub\n")
    assert kesi.run_command("pwd")[0].startswith(f"{shell}\n")


def test_stdin_is_closed(shell):
    # An open stdin would keep both waiting until the 2 s timeout, which the
    # report would say; these reports say they ended on their own.
    assert kesi.run_command("cat") == ("(no output)(exit code 0)", False)
    assert kesi.run_command("read x; echo [$x]") == ("[]\n(exit code 0)", False)


# --- process groups, timeouts, signals ----------------------------------------------------------------------

def test_a_timeout_stops_the_whole_group(shell):
    first, second = unique_sleep(), unique_sleep()
    with started_commands() as procs:
        output, is_error = kesi.run_command(f"{first} & echo begun; {second}")
    assert is_error and output.startswith("begun\n")
    assert "(the command did not finish within 2 s and was stopped)(killed by signal 15)(exit code -15)" in output
    assert not left_behind(procs, [first, second])


def test_the_model_may_ask_for_less_time_but_not_more(shell):
    output, _ = kesi.run_command(unique_sleep(), timeout=1)
    assert "within 1 s" in output
    output, _ = kesi.run_command(unique_sleep(), timeout=3600)
    assert "within 2 s" in output


def test_the_grace_period_covers_the_whole_group(shell):
    # The background shell needs 0.2 s after TERM to write its file; sh itself
    # is gone at once. Only a wait for the whole group lets it finish.
    kesi.run_command("(trap 'sleep 0.2; echo done > tidy.txt; exit' TERM; while :; do sleep 0.05; done) & "
                     "sleep 0.2")
    assert (shell / "tidy.txt").read_text() == "done\n"


def test_stop_process_group_with_no_grace_kills_at_once(plain):
    # With no grace the KILL follows the TERM at once: the trap, which needs
    # a second, never writes its file.
    proc = subprocess.Popen(["/bin/sh", "-c", "trap 'sleep 1; echo late > late.txt' TERM; "
                             "echo ready > ready.txt; while :; do sleep 0.05; done"],
                            cwd=plain, start_new_session=True)
    deadline = time.monotonic() + HANG
    while not (plain / "ready.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    kesi.stop_process_group(proc, 0)
    proc.wait(timeout=HANG)
    assert proc.returncode == -signal.SIGKILL and not (plain / "late.txt").exists()


def test_a_second_ctrl_c_during_the_grace_kills_at_once(shell, monkeypatch):
    # The command ignores TERM and the grace is an hour, so only the second,
    # impatient Ctrl-C can end it early. A watchdog stops a test that would
    # otherwise wait out the hour; its having to is the failure.
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 3600)
    first, second = unique_sleep(), unique_sleep()
    timers = [threading.Timer(t, os.kill, (os.getpid(), signal.SIGINT)) for t in (0.4, 1.2)]
    watchdog_fired = threading.Event()

    def watchdog():
        watchdog_fired.set()
        for proc in procs:
            kesi.kill_group(proc.pid)

    timers.append(threading.Timer(HANG, watchdog))
    for timer in timers:
        timer.start()
    try:
        with started_commands() as procs, pytest.raises(KeyboardInterrupt):
            kesi.run_command(f"trap '' TERM INT; {first} & trap '' TERM INT; {second}", timeout=60)
    finally:
        for timer in timers:
            timer.cancel()
    assert not watchdog_fired.is_set(), "the second Ctrl-C did not end the grace period"
    (proc,) = procs
    proc.wait(timeout=10)
    assert not left_behind(procs, [first, second])


def test_call_tool_lets_ctrl_c_through_but_turns_errors_into_results(plain, monkeypatch):
    def interrupted(command, timeout=None):
        raise KeyboardInterrupt

    def broken(command, timeout=None):
        raise RuntimeError("boom")
    monkeypatch.setitem(kesi.TOOL_FUNCS, "run_command", interrupted)
    with pytest.raises(KeyboardInterrupt):
        kesi.call_tool({"name": "run_command", "input": {"command": "true"}})
    monkeypatch.setitem(kesi.TOOL_FUNCS, "run_command", broken)
    assert kesi.call_tool({"name": "run_command", "input": {"command": "true"}}) == ("Error: run_command failed: RuntimeError: boom", True)


# --- the sandbox's part (only where one exists) ------------------------------------------------------------

@pytest.mark.skipif(AVAILABLE is None, reason="no usable OS sandbox on this machine")
def test_with_the_sandbox_secrets_and_outside_files_are_out_of_reach(ws, monkeypatch, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "secret.txt"
    outside.write_text("outside secret\n")
    (ws / ".env").write_text("KEY=sk-ant-secret\n")
    monkeypatch.setattr(kesi, "sandbox_kind", lambda: None)
    assert "sk-ant-secret" in kesi.run_command("cat .env")[0]           # no sandbox: the shell sees all
    assert "outside secret" in kesi.run_command(f"cat {outside}")[0]
    monkeypatch.setattr(kesi, "sandbox_kind", lambda: AVAILABLE)
    for command in ("cat .env", f"cat {outside}", "echo x > /usr/kesi-test"):
        output, is_error = kesi.run_command(command)
        assert is_error and "sk-ant-secret" not in output and "outside secret" not in output, command
    assert "sandbox" in kesi.run_command("cat .env")[0]                # the hint explains the refusal
    assert not os.path.exists("/usr/kesi-test")


def test_the_description_names_no_timeout_number():
    description = next(t for t in kesi.TOOLS if t["name"] == "run_command")["description"]
    assert str(kesi.COMMAND_TIMEOUT) not in description and "120" not in description


# --- the child's environment: KeSi's own virtualenv is left out -----------------------------------

needs_venv = pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="not running in a virtualenv")


def path_entries_inside(env, folder):
    own = os.path.realpath(folder)
    return [p for p in env["PATH"].split(os.pathsep)
            if os.path.realpath(p) == own or os.path.realpath(p).startswith(own + os.sep)]


@needs_venv
def test_own_venv_is_dropped_from_the_child_environment(ws, monkeypatch):
    monkeypatch.setenv("PATH", os.pathsep.join([os.path.join(sys.prefix, "bin"), "/usr/bin", "/bin"]))
    monkeypatch.setenv("VIRTUAL_ENV", sys.prefix)
    env = kesi.sandbox_environment()
    assert path_entries_inside(env, sys.prefix) == []
    assert "/usr/bin" in env["PATH"].split(os.pathsep)
    assert "VIRTUAL_ENV" not in env
    assert env["PWD"] == str(ws)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command('echo "venv=${VIRTUAL_ENV-unset} pwd=$PWD"')
    assert output.startswith(f"venv=unset pwd={ws}\n")


@needs_venv
def test_no_path_entry_inside_own_venv_survives(ws, monkeypatch):
    entries = [sys.prefix, os.path.join(sys.prefix, "lib", "tools", "bin"), "/usr/bin"]
    monkeypatch.setenv("PATH", os.pathsep.join(entries))
    assert path_entries_inside(kesi.sandbox_environment(), sys.prefix) == []


@needs_venv
def test_a_users_own_venv_is_kept(ws, tmp_path_factory, monkeypatch):
    other = str(tmp_path_factory.mktemp("user-venv"))
    monkeypatch.setenv("VIRTUAL_ENV", other)
    env = kesi.sandbox_environment()
    assert env["VIRTUAL_ENV"] == other
    assert env["PWD"] == str(ws)


def peak_rss_of_kesi_children(commands, cwd) -> list[int]:
    """Peak resident memory (KB) of fresh Pythons, side by side, that each import kesi and run one command."""
    procs = []
    for command in commands:
        script = ("import resource, kesi\n"
                  f"output, _ = kesi.run_command({command!r}, timeout=60)\n"
                  "assert output.rstrip().endswith(')'), output[-200:]\n"
                  "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
        procs.append(subprocess.Popen([sys.executable, "-c", script], cwd=cwd, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "PYTHONPATH": str(Path(kesi.__file__).parent)}))
    try:
        answers = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill(), proc.wait()
    for proc, (out, err) in zip(procs, answers):
        assert proc.returncode == 0, err[-2000:]
    return [int(out.split()[-1]) for out, _ in answers]


def test_memory_stays_bounded_however_much_a_command_prints(tmp_path):
    """50 MB of output (under the 64 MB stop) costs KeSi no more memory than 1 MB does."""
    small, large = peak_rss_of_kesi_children(["head -c 1000000 /dev/zero | tr '\\0' x",
                                              "head -c 50000000 /dev/zero | tr '\\0' x"], tmp_path)
    assert large - small < 20_000, (small, large)          # KB: far less than the 49 MB more it read
