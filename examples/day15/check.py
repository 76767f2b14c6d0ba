# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 15 checks: the run_command sandbox (bubblewrap on Linux, sandbox-exec on macOS).

Each sandbox check runs a raw shell command through kesi.run_command and so
deliberately skips the permission gate: the question is whether the
operating system stops it, not whether our string checks do. "Outside" data
lives in a uniquely named folder under the real home folder (removed at the
end); the network check only talks to a socket opened on 127.0.0.1 here.

The macOS profile is generated text, so it is checked on every platform;
only running it needs macOS.

Run: uv run examples/day15/check.py
"""
import contextlib
import io
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, sandbox_forced, use_base_dir, workspace, write_files   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                               # noqa: E402

DENIED = ("Operation not permitted", "Permission denied")
PROJECT = {
    "notes.txt": "inside the workspace\n",
    "config/.env": "DB_PASSWORD=hunter2\n",
    ".env.local": "TOKEN=abc123\n",
    "config/.git/config": "[remote]\n\turl = https://user:ghp_secret@example.com/x.git\n",
}


def sh(command):
    output, _ = kesi.run_command(command, timeout=30)
    return output


def first_line(text):
    return text.strip().splitlines()[0] if text.strip() else ""


@contextlib.contextmanager
def environment(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def captured_ui():
    saved, kesi.UI = kesi.UI, io.StringIO()
    try:
        yield kesi.UI
    finally:
        kesi.UI = saved


def listening_socket():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    return server, server.getsockname()[1]


def connect_command(port):
    return (f"{PYTHON} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); "
            "print('connected')\"")


def check_running_sandbox(checks, root, outside):
    """Sections 1-8 and the known hard-link hole, against the real sandbox."""
    secret = outside / "secret.txt"
    # 1. normal work inside the workspace
    checks.check("a file in a workspace whose name has quotes is readable",
                 sh("cat notes.txt").startswith("inside the workspace"), sh("cat notes.txt"))
    out = sh("echo 'new content' > made.txt 2>/dev/null && cat made.txt")
    made = root / "made.txt"
    checks.check("writes inside the workspace work", made.exists() and made.read_text() == "new content\n", out)
    out = sh(f"{PYTHON} -c 'print(1 + 1)'")
    checks.check(f"the toolchain still runs ({PYTHON} prints 2)", out.startswith("2\n"), out)

    # 2. the outside world is out of reach
    out = sh(f"cat '{secret}'")
    checks.check("a project in the home folder is not readable",
                 "home secret" not in out and "exit code 0" not in out, out)
    out = sh(f"echo pwned > '{outside}/planted.txt'; echo pwned > /usr/kesi-planted.txt")
    checks.check("writes outside the workspace fail",
                 not (outside / "planted.txt").exists() and not Path("/usr/kesi-planted.txt").exists(), out)
    out = sh("cat escape-link")
    checks.check("a symlink cannot lead out", "home secret" not in out and "exit code 0" not in out, out)

    # 3. secrets inside the workspace are unreadable to the shell, at any depth
    for path in ("config/.env", ".env.local"):
        out = sh(f"cat {path}")
        checks.check(f"the shell cannot read {path}", any(d in out for d in DENIED)
                     and "hunter2" not in out and "abc123" not in out and "ghp_" not in out, first_line(out))
    # .git/config is shown empty rather than denied: git refuses to run without
    # it, and an empty one hides the token in the remote URL just as well.
    out = sh("cat config/.git/config")
    checks.check("the shell sees config/.git/config empty (the token in it stays hidden)",
                 "ghp_" not in out and out.startswith("(no output)"), first_line(out))

    # 4. credentials are not handed to the child
    with environment(DEMO_API_KEY="sk-demo", GITHUB_TOKEN="ghp_demo", SSH_AUTH_SOCK="/tmp/agent.sock",
                     DATABASE_URL="postgres://u:p@h/db", KESI_DEMO_SETTING="kept"):
        out = sh("env")
    leaked = [k for k in ("DEMO_API_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK", "DATABASE_URL") if k + "=" in out]
    checks.check("credentials are removed from the environment, ordinary variables kept",
                 not leaked and "KESI_DEMO_SETTING=kept" in out and "PATH=" in out, leaked or out[:300])

    # 5. no network, not even to this machine
    server, port = listening_socket()
    try:
        sandboxed = sh(connect_command(port))
        with sandbox_forced(None):
            plain = sh(connect_command(port))
    finally:
        server.close()
    checks.check("a local test socket is unreachable from a sandboxed command",
                 "connected" not in sandboxed and "exit code 0" not in sandboxed
                 and "connected" in plain, (sandboxed[-300:], plain[-300:]))

    # 6. control: the same outside read succeeds with the sandbox off
    with sandbox_forced(None):
        out = sh(f"cat '{secret}'")
    checks.check("control: with the sandbox off the home-folder project is readable",
                 out.startswith("home secret"), out)

    # 7. the application layer is still there
    output, is_error = kesi.read_file(str(secret))
    checks.check("read_file still refuses paths outside the workspace", is_error and "home secret" not in output,
                 output)
    checks.check("cat .env still asks", kesi.classify_command("cat .env")[0] == "ask",
                 kesi.classify_command("cat .env"))

    # 8. the startup line tells the truth
    with captured_ui() as shown:
        use_base_dir(kesi.HOME_DIR)
        try:
            kesi.print_startup()
        finally:
            use_base_dir(root)
    checks.check("started in the home folder, KeSi says the boundary means nothing",
                 "means nothing" in shown.getvalue(), shown.getvalue())
    with captured_ui() as shown:
        kesi.print_startup()
    tool = {"seatbelt": kesi.SANDBOX_EXEC, "bubblewrap": "bubblewrap"}[kesi.sandbox_kind()]
    checks.check(f"a normal folder shows the sandbox as on ({tool})",
                 f"sandbox:   on ({tool})\n" in shown.getvalue(), shown.getvalue())

    # 9. known limit: a hard link made beforehand shares the outside inode
    target = outside / "linked.txt"
    target.write_text("outside inode\n")
    try:
        os.link(target, root / "hardlink.txt")
    except OSError as exc:
        checks.skip("KNOWN: a hard link reaches an inode outside the workspace", f"cannot link: {exc}")
        return
    out = sh("cat hardlink.txt && echo changed >> hardlink.txt")
    checks.check("KNOWN: a hard link reaches an inode outside the workspace (a path boundary, not an inode one)",
                 out.startswith("outside inode") and target.read_text().endswith("changed\n"), out)


def check_profile_text(checks, root):
    """The macOS profile and argv, generated on any platform."""
    profile, params = kesi.sandbox_spec()
    values = dict(params)
    checks.check("profile: paths enter only as -D parameters (a quote cannot break it)",
                 values.get("BASE_DIR") == str(root) and str(root) not in profile
                 and '(param "BASE_DIR")' in profile, params)
    rules = ["(allow default)", '(deny file-read* (subpath (param "HOME_DIR")) (subpath "/Users") '
             '(subpath "/Volumes"))', "(allow file-read-metadata)", "(deny file-write*)",
             '(allow file-write* (subpath (param "BASE_DIR")) (subpath (param "TMP_DIR")) '
             '(subpath "/private/var/folders") (subpath "/dev"))', "(deny network*)"]
    missing = [r for r in rules if r not in profile]
    checks.check("profile: home reads denied, metadata allowed, writes only workspace/tmp/dev, no network",
                 not missing, missing)
    readable = profile.splitlines()[3]
    toolchains = [v for k, v in params if k.startswith("TOOLCHAIN_")]
    checks.check("profile: the workspace and the existing toolchain folders are readable again",
                 readable.startswith('(allow file-read* (subpath (param "BASE_DIR"))')
                 and all(Path(p).is_dir() for p in toolchains)
                 and readable.count("TOOLCHAIN_") == len(toolchains), (readable, toolchains))
    secret_rule = profile.splitlines()[-1]
    checks.check("profile: .env, .env.* and .git/config are denied at any depth, as the last rule",
                 secret_rule.startswith("(deny file-read* file-write* (regex") and 'regex-quote (param "BASE_DIR")'
                 in secret_rule and r'"/(.*/)?(\\.env(\\.[^/]*)?|\\.git/config)(/|$)"' in secret_rule, secret_rule)
    with sandbox_forced("seatbelt"):
        argv = kesi.shell_argv("git status")          # git alone: .git stays writable, as in sandbox_spec()
    checks.check("shell_argv wraps the command in sandbox-exec -D ... -p profile /bin/sh -c",
                 argv[0] == kesi.SANDBOX_EXEC and argv[-3:] == [kesi.SHELL_PATH, "-c", "git status"]
                 and argv[argv.index("-p") + 1] == profile and f"BASE_DIR={root}" in argv, argv)


def make_outside_folder():
    """A throwaway 'other project' in the real home folder, outside every workspace."""
    folder = Path(tempfile.mkdtemp(prefix=".kesi-day15-", dir=kesi.HOME_DIR))
    (folder / "secret.txt").write_text("home secret\n")
    return folder


def python_for_sandbox():
    """Prefer a home-installed interpreter (pyenv, uv): that is what a toolchain hole is for."""
    shim = kesi.HOME_DIR / ".pyenv" / "shims" / "python3"
    return str(shim) if shim.exists() else (shutil.which("python3") or sys.executable)


PYTHON = python_for_sandbox()
checks = Checks("Day 15: sandbox")
outside = make_outside_folder()
try:
    with workspace() as base:
        root = base / "it's a \"quoted\" project"
        write_files(root, PROJECT)
        (root / "escape-link").symlink_to(outside / "secret.txt")
        use_base_dir(root)
        kind = kesi.sandbox_kind()
        switched_off = kesi.SANDBOX_DISABLED
        if kind is None and not switched_off and sys.platform.startswith("linux") and shutil.which("bwrap"):
            checks.check("bwrap is installed, so the sandbox must work", False, kesi.sandbox_status())
        elif kind is None:
            checks.skip("running commands in the sandbox", "no usable sandbox here: " + kesi.sandbox_status())
        else:
            print(f"  (sandbox: {kind})")
            check_running_sandbox(checks, root, outside)
        check_profile_text(checks, root)
        if sys.platform != "darwin":
            checks.skip("running the sandbox-exec profile", "macOS only")
finally:
    shutil.rmtree(outside, ignore_errors=True)

sys.exit(checks.finish())
