"""Background tasks: started by run_command(run_in_background=True) in the
same sandbox, read and stopped by id, listed by /tasks, and never left
behind when KeSi exits (normally, on SIGTERM or SIGHUP, and in bwrap even
on SIGKILL). Whether a process is left is answered from /proc by a marker
unique to the run, or by the task's own pid namespace, never by a name.
"""
import contextlib
import fcntl
import io
import json
import shutil
import tempfile
from pathlib import Path
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
import threading
import time
import uuid

import pytest

import kesi
from checklib import sandbox_forced
from mock_api import reply, tool_call
from test_permissions import KESI, child_env
from test_audit_log import widest
from test_sandbox_battery import marker_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux only")
PORT = 39517


def live_in_namespace(namespace: str) -> list[str]:
    """Processes of a pid namespace that are still running (zombies wait to be reaped)."""
    live = []
    for entry in os.scandir("/proc"):
        try:
            if entry.name.isdigit() and os.readlink(f"/proc/{entry.name}/ns/pid") == namespace:
                state = open(f"/proc/{entry.name}/stat").read().rsplit(")", 1)[1].split()[0]
                live += [entry.name] if state != "Z" else []
        except (OSError, IndexError):
            continue
    return live


def namespace_of(task) -> str:
    """The pid namespace of a task's sandbox: its bwrap's child is the namespace's first process."""
    child = Path(f"/proc/{task.proc.pid}/task/{task.proc.pid}/children").read_text().split()[0]
    return os.readlink(f"/proc/{child}/ns/pid")


def until_exited(task_id: int) -> str:
    """Everything a short background task printed, once it has ended."""
    task, output = kesi.BACKGROUND_TASKS[task_id], ""
    for _ in range(300):
        if task.proc.poll() is not None:
            break
        time.sleep(0.1)
    return output + kesi.background_output(task_id)[0]


def test_a_background_server_is_reached_by_a_later_command_then_stopped(box):
    started, failed = kesi.run_command(f"exec python3 -m http.server {PORT} --bind 127.0.0.1", run_in_background=True)
    assert not failed and "Started background task 1" in started and "share its loopback" in started, started
    task = kesi.BACKGROUND_TASKS[1]
    # A second, separate command reaches it (it retries until the server listens).
    output, failed = kesi.run_command(f"for i in $(seq 100); do curl -s -o /dev/null -w '%{{http_code}}' "
                                      f"http://127.0.0.1:{PORT}/ && break; sleep 0.1; done", timeout=60)
    assert not failed and output.startswith(("200", "000")) and "200" in output, output
    # Nothing outside the sandbox can: the shared network has no way in or out.
    with socket.socket() as probe, pytest.raises(OSError):
        probe.settimeout(5)
        probe.connect(("127.0.0.1", PORT))
        probe.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert b"Directory listing" not in probe.recv(4096)
        raise OSError("reached a server on the host's loopback, not the sandbox's")
    seen, _ = kesi.background_output(1)
    assert '"GET / HTTP/1.1" 200' in seen and "(task 1 running for" in seen, seen
    assert kesi.background_output(1)[0].startswith("(no new output)")
    kesi.UI = io.StringIO()
    kesi.handle_slash("/tasks", None, [])
    assert "1. running for" in kesi.UI.getvalue() and "http.server" in kesi.UI.getvalue()
    namespace = namespace_of(task)
    assert live_in_namespace(namespace)
    stopped, failed = kesi.background_stop(1)
    assert not failed and "(task 1 stopped" in stopped, stopped
    assert live_in_namespace(namespace) == []
    kesi.UI = io.StringIO()
    kesi.handle_slash("/tasks", None, [])
    assert "1. stopped" in kesi.UI.getvalue()


def test_a_background_task_cannot_write_git_or_home(box):
    subprocess.run(["git", "init", "-q"], cwd=box, check=True)
    _, failed = kesi.run_command("touch .git/planted; echo x > .git/hooks/post-commit; touch ~/planted; "
                                 "echo ok > made.txt; echo end", run_in_background=True)
    assert not failed
    output = until_exited(1)
    assert "end" in output and "(task 1 exited with code 0)" in output, output
    assert output.count("Read-only file system") == 3, output
    assert not (box / ".git" / "planted").exists() and not (box / ".git" / "hooks" / "post-commit").exists()
    assert (box / "made.txt").read_text() == "ok\n"       # the workspace itself stays writable


def test_background_arguments_are_checked(box):
    output, failed = kesi.run_command("true", run_in_background="yes")
    assert failed and "run_in_background must be true or false" in output
    output, failed = kesi.background_output(42)
    assert failed and "no background task 42" in output
    assert kesi.background_stop("1")[1]
    kesi.PERMISSION_MODE = "readOnly"        # the same permission check as any command
    allowed, refusal = kesi.check_permission("run_command", {"command": "python3 -m http.server",
                                                             "run_in_background": True})
    assert not allowed and "read-only mode" in refusal and not kesi.BACKGROUND_TASKS


@pytest.mark.parametrize("ending", ["exit", "SIGTERM", "SIGHUP", "SIGKILL"])
def test_no_background_process_outlives_kesi(box, mock_client, ending):
    """A real kesi.py starts a background task; however it ends, the task ends too."""
    marker = f"3{uuid.uuid4().int % 10**6}.5"         # sleep's argument is the marker
    script = [reply(tool_call("run_command", {"command": f"sleep {marker}", "run_in_background": True}))]
    if ending != "exit":     # keep KeSi busy in a foreground command while the signal comes
        script.append(reply(tool_call("run_command", {"command": "touch fg-started; sleep 60"})))
    mock, _ = mock_client([*script, reply("done")])
    proc = subprocess.Popen([sys.executable, KESI, "--permission-mode", "bypassPermissions", "-p", "go"],
                            cwd=box, env=child_env(mock, KESI_COMMAND_TIMEOUT="90"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if marker_alive(marker) or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert marker_alive(marker) or ending == "exit", proc.communicate(timeout=30)
        for _ in range(600 if ending != "exit" else 0):
            if (box / "fg-started").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        if ending != "exit":
            proc.send_signal(getattr(signal, ending))
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    if ending == "exit":
        assert proc.returncode == 0 and "Started background task 1" in err, err
    for _ in range(300):           # the kernel ends a dead parent's sandbox, but not at once (and slower under load)
        if not marker_alive(marker):
            break
        time.sleep(0.1)
    assert not marker_alive(marker), (ending, err)
    if ending in ("SIGTERM", "SIGHUP"):          # the command it ended is in the audit log (rt25d 4-5)
        log = kesi.records_folder() / kesi.AUDIT_LOG
        assert "(KeSi was ended while it ran)" in "".join(kesi.read_records(log)[0]), err


def logged(needle: str) -> bool:
    with contextlib.suppress(OSError):
        return needle in "".join(kesi.read_records(kesi.records_folder() / kesi.AUDIT_LOG)[0])
    return False


def until(condition, proc=None) -> None:
    """Until condition() holds or proc has ended (at most a minute: slow on a loaded machine)."""
    for _ in range(600):
        if condition() or (proc and proc.poll() is not None):
            return
        time.sleep(0.1)


def gone(marker: str) -> bool:
    until(lambda: not marker_alive(marker))        # a killed process may take a moment to end
    return not marker_alive(marker)


@pytest.mark.parametrize("signals", [("SIGTERM", "SIGTERM"), ("SIGHUP", "SIGTERM"), ("SIGQUIT", "SIGQUIT")])
def test_a_second_signal_does_not_cut_the_exit_short(ws, mock_client, signals):
    """Without the sandbox a task that ignores TERM outlived KeSi, unlogged, when a second SIGTERM or SIGHUP came in
    exit's grace period (rt25f 3); SIGQUIT was not handled at all (rt25f 8). Now each exits as SIGTERM does, and
    a signal during the exit is ignored until the tasks are stopped and logged."""
    marker = f"3{uuid.uuid4().int % 10**6}.5"
    mock, _ = mock_client([reply(tool_call("run_command", {"command": f"trap '' TERM; sleep {marker}",
                                                          "run_in_background": True})),
                           reply(tool_call("run_command", {"command": "touch fg-started; sleep 60"})), reply("done")])
    proc = subprocess.Popen([sys.executable, KESI, "--permission-mode", "bypassPermissions", "-p", "go"],
                            cwd=ws, env=child_env(mock, KESI_SANDBOX="off", KESI_COMMAND_TIMEOUT="90"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: (ws / "fg-started").exists(), proc)
        proc.send_signal(getattr(signal, signals[0]))
        until(lambda: logged("(KeSi was ended while it ran)"), proc)    # the exit's cleanup has begun
        proc.send_signal(getattr(signal, signals[1]))
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + getattr(signal, signals[0]) and "Traceback" not in err, err
    assert gone(marker) and logged('"decision": "stopped when KeSi exited"'), err


@pytest.mark.parametrize("ending", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_command_loses_neither_its_log_nor_the_git_check(ws, mock_client, ending):
    """A Ctrl-C or SIGTERM while KeSi stopped what a command left, or checked git after it, lost the command's audit
    entry and kept the hook it planted; on SIGTERM a job that ignores TERM outlived KeSi (rt25f 5)."""
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    marker = f"3{uuid.uuid4().int % 10**6}.5"
    command = (f"echo x > .git/hooks/pre-commit; (trap '' TERM; sleep {marker}) & echo $$ > sh.pid")
    mock, _ = mock_client([reply(tool_call("run_command", {"command": command})), reply("done")])
    proc = subprocess.Popen([sys.executable, KESI, "--permission-mode", "bypassPermissions", "-p", "go"],
                            cwd=ws, env=child_env(mock, KESI_SANDBOX="off"), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        until(lambda: (ws / "sh.pid").exists() and (ws / "sh.pid").read_text().strip(), proc)
        until(lambda: not os.path.exists(f"/proc/{(ws / 'sh.pid').read_text().strip()}"), proc)   # reaped
        proc.send_signal(getattr(signal, ending))        # KeSi waits out the job that ignores TERM
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert logged("sleep " + marker) and not (ws / ".git" / "hooks" / "pre-commit").exists(), err
    assert gone(marker), err


def test_ctrl_c_in_the_grace_of_mode_read_only_kills_at_once(ws, notices, monkeypatch):
    """Without the sandbox a Ctrl-C while /mode readOnly waited for a task to end crashed KeSi (rt25f). The grace
    is an hour; a watchdog ends the task if the Ctrl-C does not (its having to is the failure)."""
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 3600)
    kesi.PERMISSION_MODE = "bypassPermissions"
    marker, watchdog_fired = f"3{uuid.uuid4().int % 10**6}.5", threading.Event()

    def ctrl_c_once_told_to_stop():
        for _ in range(600):
            if (ws / "got-term").exists():
                return os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)

    def watchdog():
        watchdog_fired.set()
        kesi.kill_group(kesi.BACKGROUND_TASKS[1].proc.pid)

    timers = [threading.Timer(0, ctrl_c_once_told_to_stop), threading.Timer(120, watchdog)]
    with sandbox_forced(None):
        kesi.run_command(f"trap 'touch got-term' TERM; while :; do sleep 0.1; done # {marker}", run_in_background=True)
        for timer in timers:
            timer.start()
        try:
            kesi.handle_slash("/mode readOnly", None, [])
        except KeyboardInterrupt:
            pytest.fail("the Ctrl-C escaped /mode readOnly")
        finally:
            for timer in timers:
                timer.cancel()
    assert not watchdog_fired.is_set() and gone(marker)
    assert "stopped background task 1" in notices.getvalue()
    assert logged('"decision": "stopped: the person took permission back"')


# KeSi is SIGKILLed right after starting the task, and the task's bwrap runs only once KeSi is gone (as it may,
# late, on a loaded machine): it arms --die-with-parent too late, so only the lifeline can end the sandbox.
# bwrap's --json-status-fd shows that the sandbox did start, and how it ended.
KILLED_EARLY_SCRIPT = r"""
import os, signal, subprocess, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kesi
kesi.BASE_DIR = kesi.HOME_DIR = Path(sys.argv[2])
marker, status, pid_1 = sys.argv[3:]
if pid_1 == "grace wrapper":
    kesi.forwarder_python = lambda: None
popen = subprocess.Popen

def start_late_then_die(argv, *args, pass_fds=(), **kwargs):
    if marker not in " ".join(argv):
        return popen(argv, *args, pass_fds=pass_fds, **kwargs)
    fd = os.open(status, os.O_WRONLY | os.O_CREAT)
    at = argv.index(kesi.trusted_program("bwrap")) + 1
    argv[at:at] = ["--json-status-fd", str(fd)]
    alive, _ = lifeline = os.pipe()      # EOF once this process is gone (a pid may be reused: pid_max is 32768 here)
    waiting = "import os, sys; os.read(int(sys.argv[1]), 1); os.execv(sys.argv[2], sys.argv[2:])"
    popen([sys.executable, "-c", waiting, str(alive), *argv], *args, pass_fds=(*pass_fds, fd, alive), **kwargs)
    os.kill(os.getpid(), signal.SIGKILL)

subprocess.Popen = start_late_then_die
kesi.start_background_task("sleep " + marker)
"""


@pytest.mark.parametrize("pid_1", ["proxy forwarder", "grace wrapper"])
def test_the_sandbox_ends_when_kesi_dies_before_bwrap_watches_it(box, tmp_path, pid_1):
    marker, status = f"3{uuid.uuid4().int % 10**6}.5", tmp_path / "bwrap-status.json"
    script = [sys.executable, "-c", KILLED_EARLY_SCRIPT, str(Path(KESI).parent), str(box), marker, str(status), pid_1]
    killed = subprocess.run(script, cwd=box, env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
                            capture_output=True, text=True, timeout=60)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    try:
        for _ in range(600):       # bwrap waits for KeSi to be gone, then sets up, runs, ends: slow when loaded
            if not marker_alive(marker):       # the marker is in bwrap's argv too: it wrote all it will write
                break
            time.sleep(0.1)
        reports = [json.loads(line) for line in status.read_text().splitlines()
                   if line.strip().endswith("}")] if status.exists() else []
        assert not marker_alive(marker), reports or "bwrap not started"
    finally:
        for entry in Path("/proc").iterdir():       # only this run's processes: their argv holds the marker
            with contextlib.suppress(OSError, ValueError):
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(entry.name), signal.SIGKILL)
    assert reports and "child-pid" in reports[0], reports      # the sandbox did start
    # Ended by the lifeline (pid 1 KILLed), or, when bwrap won the race with KeSi's exit (the dying process had closed
    # its files but not yet handed its children on), by --die-with-parent, which then kills bwrap before it reports.
    assert reports[-1] == {"exit-code": 128 + signal.SIGKILL} or "exit-code" not in reports[-1], reports


def test_lines_a_command_writes_into_the_lifeline_end_no_sandbox(box):
    """A sandboxed command can open the lifeline for writing (/proc/self/fd): only its end kills, not its content."""
    marker = f"3{uuid.uuid4().int % 10**6}.5"
    assert not kesi.run_command(f"sleep {marker}", run_in_background=True)[1]
    task, lifeline = kesi.BACKGROUND_TASKS[1], kesi.lifeline_fd()
    output, failed = kesi.run_command(f"for i in $(seq 20); do echo stop; done >/proc/self/fd/{lifeline}; echo written")
    assert not failed and "written" in output, output
    unread = lambda: struct.unpack("i", fcntl.ioctl(lifeline, termios.FIONREAD, b"\0" * 4))[0]  # noqa: E731
    for _ in range(300):           # the task's watcher reads them all: a watcher killing at a line would stop at one
        if task.proc.poll() is not None or not unread():
            break
        time.sleep(0.1)
    assert task.proc.poll() is None and marker_alive(marker), kesi.background_output(1)[0]


NOBODY_SCRIPT = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kesi
kesi.BASE_DIR = kesi.HOME_DIR = Path(sys.argv[2])
print("sandbox:", kesi.sandbox_kind())
print(kesi.run_command("exec python3 -m http.server 39519 --bind 127.0.0.1", run_in_background=True)[0])
print(kesi.run_command("for i in $(seq 100); do curl -s -o /dev/null -w 'HTTP %{http_code}' "
                       "http://127.0.0.1:39519/ && break; sleep 0.1; done")[0])
kesi.stop_background_tasks()
"""


def as_nobody(script: str) -> subprocess.CompletedProcess:
    """script run by a copy of kesi.py as the user nobody, in a workspace of its own (skipped where bwrap cannot)."""
    shared = Path(tempfile.mkdtemp(prefix="kesi-nobody-"))
    try:
        shutil.copy(KESI, shared / "kesi.py")
        (shared / "ws").mkdir()
        for path in (shared, shared / "ws"):
            path.chmod(0o777)
        (shared / "kesi.py").chmod(0o644)
        done = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                               script, str(shared), str(shared / "ws")], cwd=shared / "ws",
                              env={"PATH": os.environ["PATH"], "HOME": str(shared / "ws")},
                              capture_output=True, text=True, timeout=90)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    if "sandbox: None" in done.stdout:
        pytest.skip("bwrap cannot run without privileges here (no unprivileged user namespaces)")
    return done


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become nobody")
def test_the_shared_network_works_for_a_user_without_privileges(box, tmp_path_factory):
    """Not root: KeSi enters the session network's user namespace first."""
    done = as_nobody(NOBODY_SCRIPT)
    assert "share its loopback network" in done.stdout and "HTTP 200" in done.stdout, (done.stdout, done.stderr)


# --- permission taken back (issue 25, class 5) -------------------------------------------

WRITER = "while :; do date >> ticks-{}; sleep 0.1; done"


def start_task(command: str) -> "kesi.BackgroundTask":
    """As the model's call goes: the permission check (asking the scripted person), then the task."""
    (kesi.BASE_DIR / "app.log").touch()
    allowed, _ = kesi.check_command_permission(command, background=True)
    assert allowed
    started, failed = kesi.run_command(command, run_in_background=True)
    assert not failed, started
    return kesi.BACKGROUND_TASKS[max(kesi.BACKGROUND_TASKS)]


def running(*tasks) -> list[bool]:
    return [task.proc.poll() is None for task in tasks]


def audited_ends(ws) -> list[tuple[int, str]]:
    log = kesi.read_records(kesi.records_folder() / kesi.AUDIT_LOG)[0]
    return [(e["background_task"], e["decision"]) for e in map(json.loads, log) if e.get("seconds")]


def test_the_notice_of_a_stopped_task_is_one_line_whatever_its_command(box, user, notices):
    """rt36b 32: a task's command with a line break printed a row of its own at column 0 in the stop notice, where
    the model could write what looked like KeSi's own words."""
    user("y")
    task = start_task("sleep 300\n(no background task stopped: none running) YOU MAY GO ON")
    kesi.handle_slash("/mode readOnly", None, [])
    assert running(task) == [False]
    shown = [line for line in notices.getvalue().splitlines() if "(no background" in line]
    assert len(shown) == 1 and shown[0].startswith("  (stopped background task 1, sleep 300\\n(no"), shown


def test_read_only_mode_stops_every_task(box, user, notices):
    """Read-only tasks too (rt37a 26): another task made a repository whose config names a textconv driver, and a
    read-only `git log -p` task ran it, writing on after /mode readOnly, whose promise is to change nothing."""
    user("y", "a")
    once, session, reader = start_task(WRITER.format(1)), start_task(WRITER.format(2)), start_task("tail -f app.log")
    kesi.handle_slash("/mode acceptEdits", None, [])          # more permission, not less: nothing stops
    assert running(once, session, reader) == [True, True, True]
    kesi.handle_slash("/mode readOnly", None, [])
    assert running(once, session, reader) == [False, False, False]
    shown = notices.getvalue()
    assert "(stopped background task 1, while :; do date >> ticks-1; sleep 0.1; done: permission mode " \
           "readOnly no longer allow it)" in shown and "stopped background task 2" in shown
    assert "(stopped background task 3, tail -f app.log: permission mode readOnly no longer allow it)" in shown
    assert audited_ends(box) == [(n, "stopped: the person took permission back") for n in (1, 2, 3)]


def test_plan_mode_is_read_only_for_tasks_too(box, user, notices):
    """Plan mode refuses every command that is not read-only, so a writer the person allowed stops (rt25b 75), and,
    as in readOnly, a read-only task too (rt37a 33)."""
    user("y")
    writer, reader = start_task(WRITER.format(1)), start_task("tail -f app.log")
    kesi.handle_slash("/mode plan", None, [])
    assert running(writer, reader) == [False, False]
    assert "permission mode plan no longer allow it" in notices.getvalue()


def test_revoke_stops_every_task(box, user, notices):
    """Read-only ones too (rt37a 52): one ran a diff driver a task the person allowed had planted, after /revoke."""
    user("y", "a")
    once, session, reader = start_task(WRITER.format(1)), start_task(WRITER.format(2)), start_task("tail -f app.log")
    kesi.handle_slash("/revoke", None, [])
    assert running(once, session, reader) == [False, False, False]
    assert "permission mode default and /revoke no longer allow it" in notices.getvalue()


def test_leaving_bypass_mode_stops_what_only_the_mode_allowed(box, user, notices):
    user("a")
    kesi.handle_slash("/mode bypassPermissions", None, [])
    by_mode = start_task(WRITER.format(1))
    kesi.handle_slash("/mode default", None, [])
    granted = start_task(WRITER.format(2))                 # asked, and allowed for the session
    kesi.handle_slash("/mode acceptEdits", None, [])
    assert running(by_mode, granted) == [False, True]
    assert "stopped background task 1" in notices.getvalue() and "task 2" not in notices.getvalue()


SANDBOX_OFF_TASKS = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kesi


def marker_alive(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    return True
        except (OSError, IndexError):
            continue
    return False


kesi.SANDBOX_DISABLED, kesi.BASE_DIR, kesi.PERMISSION_MODE = True, Path.cwd(), "bypassPermissions"
kesi.KILL_GRACE_SECONDS = 0.5


def start(marker: str) -> list[str]:
    # setsid: a session of its own; the subshell's setsid sh exits at once: its sleep is orphaned
    markers = [f"{marker}1", f"{marker}2", f"{marker}0"]
    command = f"setsid sleep {markers[0]} & (setsid sh -c 'sleep {markers[1]} & exit' &); exec sleep {markers[2]}"
    assert kesi.check_command_permission(command, background=True)[0]
    assert not kesi.run_command(command, run_in_background=True)[1]
    for _ in range(600):
        if all(map(marker_alive, markers)):
            return markers
        time.sleep(0.05)
    raise SystemExit("the task's processes never started")


first = start(sys.argv[2])
kesi.handle_slash("/mode readOnly", None, [])
kesi.handle_slash("/mode bypassPermissions", None, [])
print(json.dumps({"after /mode readOnly": [marker_alive(m) for m in first], "at exit": start(sys.argv[3])}))
"""


def test_with_the_sandbox_off_no_process_a_task_left_outlives_it(tmp_path):
    """Without bwrap's pid namespace, a task's setsid and orphaned children are stopped with it: on /mode
    readOnly and when KeSi exits (L4). KeSi adopts them (PR_SET_CHILD_SUBREAPER)."""
    run = uuid.uuid4().int % 10**6
    done = subprocess.run([sys.executable, "-c", SANDBOX_OFF_TASKS, str(Path(kesi.__file__).parent),
                            f"4{run}.", f"5{run}."], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.splitlines()[-1])
        assert seen["after /mode readOnly"] == [False, False, False], seen
        assert not any(marker_alive(m) for m in seen["at exit"]), seen
    finally:
        for entry in Path("/proc").glob("[0-9]*/cmdline"):           # leave nothing behind, even on failure
            with contextlib.suppress(OSError):
                if f"{run}.".encode() in entry.read_bytes():
                    os.kill(int(entry.parent.name), signal.SIGKILL)


SANDBOX_OFF_FOREGROUND = SANDBOX_OFF_TASKS.split("def start(")[0] + r"""
markers = [f"{sys.argv[2]}1", f"{sys.argv[2]}2"]
text, _ = kesi.run_command(f"setsid sleep {markers[0]} & (setsid sh -c 'sleep {markers[1]} & exit' &); echo ran")
print(json.dumps({"output": text, "alive": [marker_alive(m) for m in markers]}))
"""


def test_with_the_sandbox_off_a_foreground_command_leaves_no_process_behind(tmp_path):
    """A foreground command's setsid and double-forked children outlived it, and KeSi, without bwrap: KeSi
    was their subreaper only once a background task had started (rt25b 36-37). Now they end with the command."""
    run = uuid.uuid4().int % 10**6
    done = subprocess.run([sys.executable, "-c", SANDBOX_OFF_FOREGROUND, str(Path(kesi.__file__).parent),
                           f"6{run}."], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    try:
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout.splitlines()[-1])
        assert seen["output"].startswith("ran") and seen["alive"] == [False, False], seen
    finally:
        for entry in Path("/proc").glob("[0-9]*/cmdline"):           # leave nothing behind, even on failure
            with contextlib.suppress(OSError):
                if f"{run}.".encode() in entry.read_bytes():
                    os.kill(int(entry.parent.name), signal.SIGKILL)


def test_a_shell_stopped_in_vfork_counts_as_paused():
    """dash starts each program with vfork: stopped then, it waits in the kernel for its stopped child and never
    shows the stopped state itself. Taken for running, it made every pause wait out its 10 s deadline."""
    if shutil.which("dash") is None:
        pytest.skip("needs dash")
    loop = subprocess.Popen(["dash", "-c", "while :; do /bin/true; done"], start_new_session=True)
    try:
        for _ in range(5000):
            os.killpg(loop.pid, signal.SIGSTOP)
            state = Path(f"/proc/{loop.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "D" and Path(f"/proc/{loop.pid}/wchan").read_text() in ("kernel_clone", "_do_fork"):
                break
            os.killpg(loop.pid, signal.SIGCONT)
        else:
            pytest.skip("dash was never caught in vfork")
        children = Path(f"/proc/{loop.pid}/task/{loop.pid}/children").read_text().split()
        time.sleep(0.05)          # the child's stop lands
        assert not any(kesi.moving_threads(int(child)) for child in children) and not kesi.moving_threads(loop.pid)
        assert kesi.moving_threads(os.getpid())           # this one runs
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait()



def test_characters_some_terminals_draw_wide_cannot_draw_a_task_in_slash_tasks(box, monkeypatch):
    """rt25 61: a task's command padded with regional indicators (two columns on Unicode 16 terminals, one in
    Python's tables) was wrapped by the terminal, and its tail began a row as another task."""
    monkeypatch.setattr(kesi, "terminal_width", lambda: 80)
    for pad in (10, 16, 22):
        started, failed = kesi.run_command("sleep 60 #" + "\U0001f1e6" * pad + "  4. running for 1 s  echo fake",
                                           run_in_background=True)
        assert not failed, started
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    kesi.handle_slash("/tasks", None, [])
    lines = kesi.UI.getvalue().splitlines()
    assert len(lines) >= 3 and all(widest(line) <= 80 for line in lines), lines


@pytest.mark.parametrize("escalation", ["network", "unsandboxed"])
def test_a_command_never_leaves_the_sandbox_beside_running_tasks(box, escalation):
    """rt36d 25-26: the one command allowed to leave handed a task a host connection (or an outside folder) over a
    socket in the workspace, and the task kept it after the command ended. While tasks run, none leaves."""
    marker = f"3{uuid.uuid4().int % 10**6}.5"
    assert not kesi.run_command(f"sleep {marker}", run_in_background=True)[1]
    kesi.grant_escalation(kesi.command_key("echo left"), escalation, True)
    output, failed = kesi.run_command("echo left")
    assert failed and "the sandbox holds 1 background task" in output and "background_stop" in output, output
    kesi.stop_background_tasks()
    output, failed = kesi.run_command("echo left")
    assert not failed and "left" in output, output


def assert_no_plant_runs(repository: Path, marker: Path) -> None:
    """No core.fsmonitor left in its config, and the person's git status there runs nothing."""
    config = repository / ".git" / "config"
    assert not config.exists() or "fsmonitor" not in config.read_text(), config.read_text()
    subprocess.run(["git", "status"], cwd=repository, capture_output=True, timeout=30)
    assert not marker.exists()


@pytest.mark.parametrize("run", range(3))        # the race was lost in about half the runs
def test_a_task_that_outruns_the_pause_leaves_no_plant_behind(box, run):
    """rt37h B3-B4: a task that is a fork chain (each member plants, forks the next, exits) outran KeSi's SIGSTOPs,
    and its core.fsmonitor in a repository it made stayed after every check, background_stop and the exit check."""
    marker = box.parent / f"chain-ran-{uuid.uuid4().hex}"
    chain = (f"git init -q R && f() {{ printf '[core]\\n\\tfsmonitor = touch {marker}\\n' > R/.git/config; f & }}; "
             "f; sleep 600")
    assert not kesi.run_command(chain, run_in_background=True)[1]
    for _ in range(300):
        if "fsmonitor" in ((box / "R" / ".git" / "config").read_text() if (box / "R" / ".git" / "config").exists()
                           else ""):
            break
        time.sleep(0.1)
    for _ in range(2):
        kesi.run_command("true")
    kesi.stop_background_tasks()
    assert_no_plant_runs(box / "R", marker)


FREEZE_SCRIPT = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import kesi
kesi.BASE_DIR = kesi.HOME_DIR = Path(sys.argv[2])
print("sandbox:", kesi.sandbox_kind())
print(kesi.run_command("f() { : > chain; f & }; f; sleep 600", run_in_background=True)[0])
time.sleep(1)
with kesi.background_tasks_paused() as roots:
    inside = kesi.sandbox_processes(roots)[2:]          # past bwrap and the namespace's init
    time.sleep(0.5)
    states = [Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] for pid in inside]
    print("states:", "".join(states), "moved:", len(set(kesi.sandbox_processes(roots)[2:]) - set(inside)))
kesi.stop_background_tasks()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root to become nobody")
def test_a_fork_chain_is_stopped_whole_for_a_user_without_privileges(box):
    """Not root: KeSi enters the user namespace that owns the task's pid namespace (bwrap nests one more) to stop
    all in it at once; a scan of /proc alone lets a fork chain run on (rt37h B3)."""
    done = as_nobody(FREEZE_SCRIPT)
    states = re.search(r"states: (\S*) moved: (\d+)", done.stdout)
    assert states and states[1] and set(states[1]) <= set("TZ") and states[2] == "0", (done.stdout, done.stderr)


# rt38a 4, 8, rt38b B1-B3: the kernel wakes a stopped task with a SIGCONT the task arranged (a POSIX timer's, inotify
# with F_SETSIG, a lease break, an orphaned process group). Here the test sends them, as a timer would: the task ran
# while paused, so it is ended, and what KeSi read meanwhile is not used.
def test_a_task_woken_while_paused_is_ended_and_its_plant_put_back(box, notices):
    marker = box.parent / f"woke-{uuid.uuid4().hex}"
    plant = (f"git init -q R && while :; do printf '[core]\\n\\tfsmonitor = touch {marker}\\n' > R/.git/c && "
             "mv R/.git/c R/.git/config; done")
    assert not kesi.run_command(plant, run_in_background=True)[1]
    task, done = kesi.BACKGROUND_TASKS[1], threading.Event()
    for _ in range(300):
        if "fsmonitor" in ((box / "R/.git/config").read_text() if (box / "R/.git/config").exists() else ""):
            break
        time.sleep(0.1)

    def wake():
        while not done.is_set():
            kesi.send_signal(kesi.sandbox_processes([task.proc.pid])[2:], signal.SIGCONT)   # past bwrap and pid 1
            time.sleep(0.001)
    waker = threading.Thread(target=wake, daemon=True)
    waker.start()
    try:
        outputs = [kesi.run_command("true")[0] for _ in range(6)]
    finally:
        done.set()
        waker.join()
    assert task.proc.poll() is not None, outputs            # ended: it ran while paused
    assert "ran while paused" in notices.getvalue() and "background task 1" in notices.getvalue(), outputs
    kesi.stop_background_tasks()
    assert_no_plant_runs(box / "R", marker)


# rt38d P1: a thread traces itself (PTRACE_TRACEME) and exits, then its process execs: exec waits for the traced
# zombie its parent never reaps, stuck in the kernel for good. Each look waited 10 s for it, and nothing was said.
STUCK_IN_EXEC = """
import ctypes, os, signal, threading
if os.fork() == 0:
    thread = threading.Thread(target=lambda: ctypes.CDLL(None).ptrace(0, 0, None, None))
    thread.start()
    thread.join()
    os.execlp("true", "true")
signal.pause()
"""


def test_a_process_stuck_in_the_kernel_costs_each_look_a_bounded_wait_and_is_said(box, notices):
    kesi.notice_once.cache_clear()                      # said once a session: this test's session starts here
    (box / "stuck.py").write_text(STUCK_IN_EXEC)
    assert not kesi.run_command("python3 stuck.py", run_in_background=True)[1]
    task = kesi.BACKGROUND_TASKS[1]
    for _ in range(100):
        if any(kesi.moving_threads(pid) for pid in kesi.sandbox_processes([task.proc.pid])[2:]):
            break
        time.sleep(0.1)
    output, failed = kesi.run_command("echo still works")
    assert not failed and "still works" in output, output
    assert "does not pause, stuck in the kernel" in notices.getvalue() and task.proc.poll() is None


def test_a_thread_already_dying_at_the_pause_may_go_but_a_live_one_may_not():
    """A request thread of a threaded dev server that ended just as the pause came is gone by the look's end: that
    is no run while paused (it would end the person's server), a live thread gone or changed is."""
    stopped, zombie = ("State:\tT (stopped)", "voluntary_ctxt_switches:\t5", ""), ("State:\tZ (zombie)", "", "")
    assert not kesi.ran_while_paused({1: stopped, 2: zombie}, {1: stopped})
    assert kesi.ran_while_paused({1: stopped, 2: stopped}, {1: stopped})                  # a live one gone
    assert kesi.ran_while_paused({1: stopped}, {1: stopped, 3: stopped})                  # a new one
    assert kesi.ran_while_paused({1: stopped}, {1: ("State:\tS (sleeping)", "voluntary_ctxt_switches:\t6", "")})
