"""The run_command sandbox: bubblewrap argv and real runs, the macOS profile
text, the environment scrub, and the three honest states (on / useless / off)
in the startup line and the system prompt.

Real-run tests use the real bwrap and skip only where no sandbox exists. On
Linux with bwrap installed, a sandbox that fails to start is a failure, not
a skip. "Outside" data lives in a uniquely named folder under the real home
folder, removed afterwards; the network test only uses a socket on 127.0.0.1.
"""
import contextlib
import errno
import io
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import kesi
from checklib import sandbox_forced, use_base_dir
from mock_api import reply
from test_permissions import KESI, child_env

LINUX_BWRAP = sys.platform.startswith("linux") and shutil.which("bwrap") is not None
SECRETS = {".env": "KEY=top\n", ".env.production": "KEY=prod\n", "deep/a/b/.env": "KEY=deep\n",
           "sub/.git/config": "[remote]\n\turl = https://u:ghp_x@example.com/r.git\n"}
DENIED = ("Permission denied", "Operation not permitted")


def write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def sh(command: str) -> tuple[str, bool]:
    return kesi.run_command(command, timeout=30)


@pytest.fixture
def sandboxed(ws):
    if kesi.sandbox_kind() is None:
        if LINUX_BWRAP and not kesi.SANDBOX_DISABLED:
            pytest.fail("bwrap is installed but KeSi found no usable sandbox: " + kesi.sandbox_status())
        pytest.skip("no sandbox on this machine")
    return ws


@pytest.fixture
def outside():
    """A throwaway 'other project' under the real home folder."""
    folder = Path(tempfile.mkdtemp(prefix=".kesi-test-", dir=kesi.HOME_DIR))
    (folder / "secret.txt").write_text("home secret\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def listener():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def tcp_probe(port: int) -> str:
    # bash's /dev/tcp needs no toolchain, so it also works with HOME hidden.
    return f"bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'"


# --- bubblewrap argv ---------------------------------------------------------------

def pairs(argv: list[str]) -> list[tuple]:
    return list(zip(argv, argv[1:], argv[2:]))


def test_bwrap_argv_policy(ws):
    write(ws, {**SECRETS, "node_modules/pkg/.env": "x\n", ".venv/.env": "x\n", "src/app.py": ""})
    argv = kesi.bwrap_argv("echo hi")
    assert os.path.isabs(argv[0]) and os.path.basename(argv[0]) == "bwrap" and argv[-8:-3] == [kesi.SHELL_PATH, "-c", kesi.GRACE_WRAPPER, kesi.SHELL_PATH, "echo hi"]
    for flag in ("--die-with-parent", "--unshare-net", "--unshare-pid", "--cap-drop"):
        assert flag in argv
    triples, twos = pairs(argv), list(zip(argv, argv[1:]))
    assert ("--ro-bind", "/proc/sys", "/proc/sys") in triples and ("--tmpfs", "/run") in twos
    assert ("--ro-bind", "/", "/") in triples
    assert ("--tmpfs", "/tmp") in twos and ("--tmpfs", str(kesi.HOME_DIR)) in twos
    assert ("--bind", str(ws), str(ws)) in triples and ("--chdir", str(ws)) in twos
    for path in kesi.toolchain_dirs():
        assert ("--ro-bind", path, path) in triples
    masked = {t[2] for t in triples if t[0] == "--ro-bind" and t[1].startswith(tuple(kesi.denied_sources().values()))}
    # Dependency folders are searched too (by rg): a package may ship a .env.
    assert masked - set(kesi.system_secrets()) == {str(ws / rel) for rel in [*SECRETS, "node_modules/pkg/.env",
                                                                         ".venv/.env"]}
    # Order matters: the workspace is bound after /tmp and home are hidden,
    # and the masks come after the workspace, or they would be covered.
    assert argv.index(str(kesi.HOME_DIR)) < argv.index("--bind") < argv.index(str(ws / ".env"))


def test_toolchain_dirs_are_only_existing_home_folders(ws, tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    (home / ".cargo").mkdir()
    (home / ".cache" / "uv").mkdir(parents=True)
    (home / ".local").write_text("a file, not a folder")
    monkeypatch.setattr(kesi, "HOME_DIR", home)
    assert kesi.toolchain_dirs() == [str(home / ".cargo"), str(home / ".cache/uv")]


def test_environment_scrub(monkeypatch):
    for name in ("DEMO_API_KEY", "GITHUB_TOKEN", "AWS_SECRET", "DB_PASSWORD", "GCP_CREDENTIALS",
                 "SSH_AUTH_SOCK", "DATABASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.setenv(name, "secret")
    monkeypatch.setenv("KESI_NORMAL", "kept")
    monkeypatch.setenv("GH_PAT", "secret")          # no secret word: the allowlist drops it anyway
    child = kesi.sandbox_environment()
    assert not {k for k, v in child.items() if v == "secret"}
    assert child["KESI_NORMAL"] == "kept"
    # PATH is kept, except the virtual environment KeSi itself runs in
    own_bin = os.path.realpath(os.path.join(sys.prefix, "bin"))
    assert child["PATH"].split(os.pathsep) == [p for p in os.environ["PATH"].split(os.pathsep)
                                               if sys.prefix == sys.base_prefix or os.path.realpath(p) != own_bin]


# --- real runs under the sandbox ------------------------------------------------------

def test_workspace_works_and_secrets_are_masked_at_any_depth(sandboxed):
    write(sandboxed, {**SECRETS, "notes.txt": "hello\n"})
    output, failed = sh("cat notes.txt && echo made > made.txt 2>/dev/null")   # /dev stays writable
    assert not failed and output.startswith("hello") and (sandboxed / "made.txt").read_text() == "made\n"
    for rel in SECRETS:
        output, failed = sh(f"cat {rel}")
        if rel.endswith(".git/config"):   # shown empty so that git still runs
            assert not failed and output.startswith("(no output)"), output
        else:
            assert failed and any(d in output for d in DENIED) and "KEY=" not in output and "ghp_" not in output
    output, failed = sh("echo overwrite > .env")
    assert failed and (sandboxed / ".env").read_text() == "KEY=top\n"


def test_caches_stay_usable(sandboxed):
    """Only secrets are masked: tests need node_modules and .venv."""
    write(sandboxed, {"node_modules/pkg/index.js": "module.exports = 1\n", ".venv/pyvenv.cfg": "home = x\n"})
    output, failed = sh("cat node_modules/pkg/index.js .venv/pyvenv.cfg")
    assert not failed and "module.exports" in output and "home = x" in output


def test_git_log_runs_in_a_sandboxed_repo(sandboxed):
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}
    (sandboxed / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "a.txt"], ["commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=sandboxed, env=env, check=True, capture_output=True)
    (sandboxed / ".git" / "config").write_text("[remote \"origin\"]\n\turl = https://u:ghp_tok@example.com/r.git\n")
    output, failed = sh("git log --oneline && git status --short && cat .git/config")
    assert not failed and "first" in output and "ghp_tok" not in output, output


def test_outside_the_workspace_is_out_of_reach(sandboxed, outside):
    (sandboxed / "escape-link").symlink_to(outside / "secret.txt")
    for command in (f"cat '{outside}/secret.txt'", "cat escape-link"):
        output, failed = sh(command)
        assert failed and "home secret" not in output, command
    assert outside.name not in sh(f"ls -a '{kesi.HOME_DIR}'")[0]
    sh(f"echo planted > '{outside}/planted.txt'")
    assert not (outside / "planted.txt").exists()
    output, failed = sh("echo planted > /usr/kesi-planted.txt")
    assert failed and "Read-only file system" in output and not Path("/usr/kesi-planted.txt").exists()
    assert "may be the sandbox at work" in output        # the hint that explains it to the model
    with sandbox_forced(None):                           # control: the sandbox is what stopped it
        assert sh(f"cat '{outside}/secret.txt'")[0].startswith("home secret")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap's private /tmp is Linux only")
def test_tmp_is_private(sandboxed):
    sibling = Path(tempfile.mkdtemp(prefix="kesi-sibling-"))
    try:
        (sibling / "data.txt").write_text("sibling data\n")
        output, _ = sh(f"cat '{sibling}/data.txt'; echo scratch > /tmp/kesi-scratch.txt && cat /tmp/kesi-scratch.txt")
        assert "sibling data" not in output and "scratch" in output
        assert not Path("/tmp/kesi-scratch.txt").exists()
    finally:
        shutil.rmtree(sibling)


def test_no_network_even_to_localhost(sandboxed, listener):
    output, failed = sh(tcp_probe(listener))
    assert failed and "connected" not in output
    assert "Connection refused" in output or "Network is unreachable" in output, output
    with sandbox_forced(None):
        output, failed = sh(tcp_probe(listener))
    assert not failed and "connected" in output


def test_home_toolchains_run(sandboxed):
    shim = kesi.HOME_DIR / ".pyenv" / "shims" / "python3"
    pythons = [str(shim)] if shim.exists() else []
    if str(Path(sys.executable)).startswith(str(kesi.HOME_DIR)):
        pythons.append(sys.executable)            # uv's interpreter, under ~/.cache/uv
    if not pythons:
        pytest.skip("no interpreter installed under the home folder")
    for python in pythons:
        output, failed = sh(f"{python} -c 'print(6 * 7)'")
        assert not failed and output.startswith("42"), (python, output)


def test_credentials_do_not_reach_the_command(sandboxed, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-leak")
    monkeypatch.setenv("DEMO_TOKEN", "tok-leak")
    output, failed = sh("env")
    assert not failed and "leak" not in output and "PATH=" in output
    # Nor through /proc: KeSi's own environment still holds the key.
    output, failed = sh(f"cat /proc/{os.getpid()}/environ")
    assert failed and "leak" not in output


def test_quoted_workspace_name(sandboxed):
    root = sandboxed / "it's a \"quoted\" $dir"
    write(root, {"a.txt": "quoted ok\n", ".env": "KEY=q\n"})
    use_base_dir(root)
    assert sh("cat a.txt")[0].startswith("quoted ok")
    assert "KEY=q" not in sh("cat .env")[0]


def test_started_in_home_boundary_is_void_but_secrets_and_network_hold(sandboxed, monkeypatch, listener):
    monkeypatch.setattr(kesi, "HOME_DIR", sandboxed)
    write(sandboxed, {"notes.txt": "mine\n", "proj/.env": "KEY=home\n"})
    assert kesi.sandbox_state() == "useless"
    assert sh("cat notes.txt")[0].startswith("mine")
    output, failed = sh("cat proj/.env")
    assert failed and "KEY=home" not in output
    output, failed = sh(tcp_probe(listener))
    assert failed and "connected" not in output


# --- the macOS profile ----------------------------------------------------------------

def test_seatbelt_profile_takes_paths_only_as_parameters(ws):
    root = ws / 'evil") (allow file-read* (subpath "/'
    root.mkdir()
    use_base_dir(root)
    profile, params = kesi.sandbox_spec()
    assert str(root) not in profile and "evil" not in profile
    assert dict(params)["BASE_DIR"] == str(root) and dict(params)["HOME_DIR"] == str(kesi.HOME_DIR)
    assert dict(params)["TMP_DIR"] == os.path.realpath(tempfile.gettempdir())
    assert profile.count("(") == profile.count(")")
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(allow default)"]
    assert lines.index("(deny file-write*)") < next(i for i, l in enumerate(lines) if l.startswith("(allow file-write*"))
    assert "(deny network*)" in lines and "(allow file-read-metadata)" in lines
    assert lines[-1].startswith("(deny file-read* file-write* (regex")


def test_seatbelt_profile_protects_git_control_files(ws):
    profile, _ = kesi.sandbox_spec()
    line = next(l for l in profile.splitlines() if l.startswith("(deny file-write* (regex") and ".git" in l)
    pattern = re.compile(re.escape(str(ws)) + line.split('"')[-2].replace("\\\\", "\\"))
    for rel in (".git", ".git/hooks", ".git/hooks/pre-commit", ".git/config", ".git/commondir",
                ".git/config.worktree"):
        assert pattern.match(f"{ws}/{rel}"), rel
    for rel in (".git/index", ".git/objects/ab/cdef", ".git/refs/heads/main", ".git/HEAD", ".gitignore", "src/.git2"):
        assert not pattern.match(f"{ws}/{rel}"), rel


def test_seatbelt_argv(ws):
    with sandbox_forced("seatbelt"):
        argv = kesi.shell_argv("ls")
    profile, params = kesi.sandbox_spec(git_read_only=True)          # ls runs more than git
    defines = argv[1:argv.index("-p")]
    assert argv[0] == kesi.SANDBOX_EXEC and defines == [a for n, v in params for a in ("-D", f"{n}={v}")]
    assert argv[argv.index("-p") + 1:] == [profile, kesi.SHELL_PATH, "-c", "ls"]
    with sandbox_forced(None):
        assert kesi.shell_argv("ls") == [kesi.SHELL_PATH, "-c", "ls"]


@pytest.mark.skipif(sys.platform != "darwin", reason="sandbox-exec exists only on macOS")
def test_seatbelt_runs_for_real(ws):
    write(ws, {"a.txt": "fine\n", "sub/.env": "KEY=mac\n"})
    with sandbox_forced("seatbelt"):
        assert sh("cat a.txt")[0].startswith("fine")
        output, failed = sh("cat sub/.env")
    assert failed and "Operation not permitted" in output


# --- honest state: startup line and system prompt --------------------------------------

@pytest.mark.parametrize("state", ["on", "useless", "off"])
def test_environment_block_states_the_sandbox(ws, monkeypatch, state):
    if state != "off" and kesi.sandbox_kind() is None:
        pytest.skip("no sandbox on this machine")
    if state == "useless":
        monkeypatch.setattr(kesi, "HOME_DIR", ws)
    with sandbox_forced(None) if state == "off" else contextlib.nullcontext():
        block = kesi.environment_block()
        summary = kesi.sandbox_status()
    assert kesi.SANDBOX_LINES[state] in block
    assert (kesi.SANDBOX_HINT in block) == (state != "off")
    assert {"on": "on (", "useless": "means nothing", "off": "unavailable"}[state] in summary


def test_system_prompt_sent_to_the_model_states_the_sandbox(sandboxed, mock_client, monkeypatch):
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    mock, client = mock_client([reply("hi")])
    kesi.MAIN_AGENT.echo = False
    kesi.run_agent(client, [{"role": "user", "content": "hello"}])
    system = " ".join(b["text"] for b in mock.requests[0]["body"]["system"])
    assert kesi.SANDBOX_LINES["on"] in system and kesi.SANDBOX_HINT in system


def test_startup_line_in_a_real_kesi_process(ws, mock_client, tmp_path_factory):
    """on / useless (started in HOME) / off (KESI_SANDBOX=off), from kesi.py itself."""
    mock, _ = mock_client()
    home = tmp_path_factory.mktemp("home")
    runs = {"on": (ws, {}), "useless": (home, {"HOME": str(home)}), "off": (ws, {"KESI_SANDBOX": "off"})}
    procs = {state: subprocess.Popen([sys.executable, KESI], cwd=cwd, env=child_env(mock, **extra),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
             for state, (cwd, extra) in runs.items()}
    shown = {state: proc.communicate(timeout=60)[0] for state, proc in procs.items()}
    assert all(proc.returncode == 0 for proc in procs.values()), shown
    if kesi.sandbox_kind() is not None:
        tool = {"seatbelt": kesi.SANDBOX_EXEC, "bubblewrap": "bubblewrap"}[kesi.sandbox_kind()]
        assert f"sandbox:   on ({tool})\n" in shown["on"]
        assert "means nothing: start KeSi in a project folder" in shown["useless"]
    assert "sandbox:   off (KESI_SANDBOX): commands run with your full user rights" in shown["off"]
    assert mock.requests == []      # nobody typed anything: no API call


def test_toolchain_credentials_stay_hidden(sandboxed, tmp_path_factory, monkeypatch):
    """Toolchain folders are readable again inside the hidden home, but the
    credential files some of them keep are masked once more."""
    home = tmp_path_factory.mktemp("home")
    (home / ".cargo" / "bin").mkdir(parents=True)
    (home / ".cargo" / "bin" / "tool").write_text("a tool\n")
    (home / ".cargo" / "credentials.toml").write_text('token = "cargo-canary"\n')
    monkeypatch.setattr(kesi, "HOME_DIR", home)
    assert kesi.toolchain_secrets() == [str(home / ".cargo" / "credentials.toml")]
    output, failed = sh(f"cat '{home}/.cargo/bin/tool' && cat '{home}/.cargo/credentials.toml'")
    assert output.startswith("a tool\n") and "cargo-canary" not in output and failed, output
    profile, params = kesi.sandbox_spec()
    assert ("TOOLCHAIN_SECRET_0", str(home / ".cargo" / "credentials.toml")) in params
    assert '(deny file-read* (literal (param "TOOLCHAIN_SECRET_0")))' in profile


# --- symlinked secrets are not mounted over -------------------------------------------------------

def test_symlinked_env_files_are_not_masked_and_commands_still_run(ws, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "settings.txt"
    outside.write_text("not a secret\n")
    (ws / "dangling").mkdir()
    (ws / "dangling" / ".env").symlink_to(ws / "no-such-file")
    (ws / "linked").mkdir()
    (ws / "linked" / ".env").symlink_to(outside)
    (ws / ".env").write_text("KEY=1\n")                 # a real secret: still masked

    assert kesi.scan_workspace()[0] == [ws / ".env"]
    argv = kesi.bwrap_argv("echo ok")
    assert str(ws / ".env") in argv
    assert not any(".env" in arg and arg not in (str(ws / ".env"), kesi.PROXY_FORWARDER) for arg in argv)

    if kesi.sandbox_kind() is None:
        pytest.skip("bubblewrap is not usable here")
    output, is_error = kesi.run_command("echo ok")
    assert (output, is_error) == ("ok\n(exit code 0)", False)
    output, _ = kesi.run_command("cat .env")             # the mask really holds
    assert "KEY=1" not in output


KEYCTL = {"x86_64": 250, "aarch64": 219}      # KEYCTL_GET_KEYRING_ID of the session keyring (-3), not created


@pytest.mark.skipif(platform.machine() not in KEYCTL, reason="keyctl's number is known for x86_64 and aarch64 only")
def test_the_persons_session_keyring_is_out_of_reach(sandboxed):
    """bwrap keeps the caller's session keyring: Kerberos caches and stored tokens there must not be readable."""
    probe = (f"import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
             f"print('keyctl', libc.syscall({KEYCTL[platform.machine()]}, 0, -3, 0), ctypes.get_errno())")
    (sandboxed / "probe.py").write_text(probe + "\n")
    outside = subprocess.run(["python3", "probe.py"], cwd=sandboxed, capture_output=True, text=True).stdout
    if int(outside.split()[1]) < 0:
        pytest.skip(f"this machine refuses keyctl outside the sandbox too: {outside}")
    output, failed = sh("python3 probe.py")
    assert f"keyctl -1 {errno.EPERM}" in output, output


# rt38a 5-7, 10: code put into the sandbox's pid 1 ran on after the command and after KeSi (it left bwrap's group and
# dropped its parent-death signal). No command attaches to pid 1 or writes its memory; its own children it may trace.
PID_1_PROBE = """
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
def attach(pid):
    result = libc.ptrace(16, pid, None, None)                  # PTRACE_ATTACH
    return "ok" if result == 0 else os.strerror(ctypes.get_errno())
child = os.fork()
if child == 0:
    time.sleep(30)
    os._exit(0)
print("child:", attach(child))
os.kill(child, signal.SIGKILL)
print("pid 1:", attach(1), "| as 2**32 + 1:", attach(2**32 + 1))
data = ctypes.create_string_buffer(8)
local = (ctypes.c_void_p * 2)(ctypes.cast(data, ctypes.c_void_p), 8)
wrote = libc.process_vm_writev(1, local, 1, local, 1, 0)
print("vm write:", "ok" if wrote >= 0 else os.strerror(ctypes.get_errno()))
for path in ("/proc/1/mem", "/proc/1/task/1/mem"):
    try:
        with open(path, "r+b", buffering=0) as mem:
            mem.seek(0x400000)
            print(path, "wrote", mem.write(b"x"))
    except OSError as error:
        print(path, "refused:", error.strerror)
"""


@pytest.mark.parametrize("proxied", [False, True], ids=["bwrap init", "forwarder"])
def test_no_command_can_attach_to_or_write_the_sandboxes_pid_1(box, proxied, monkeypatch):
    if not proxied:
        monkeypatch.setattr(kesi, "proxy_port", lambda *_: None)      # no forwarder: bwrap's own init is pid 1
    (box / "probe.py").write_text(PID_1_PROBE)
    output, _ = sh("python3 probe.py")
    assert "child: ok" in output, output                          # tracing one's own processes still works
    assert "pid 1: Operation not permitted | as 2**32 + 1: Operation not permitted" in output, output
    assert "vm write: Operation not permitted" in output, output
    assert "wrote" not in output, output
