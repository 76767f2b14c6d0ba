"""Everyday work inside the real sandbox (bubblewrap): toolchain caches in
.kesi/cache, a read-only home, git commits with the user's identity, and a
scripted session that does a day's work with all of it.

Nothing here needs the network: packages come from wheels the tests build
(pytest's are packed from this environment's own copy), read from a folder
or from a local index that sandboxed commands reach through KeSi's proxy.
"""
import io
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import sys
from pathlib import Path

import pytest

import kesi
from checklib import records_of, sandbox_forced
from local_index import build_wheel, installed_wheels, simple_index
from mock_api import MockAPI, reply, tool_call
from test_network import IndexServer, config, server  # noqa: F401 (fixtures)
from test_permissions import KESI, child_env

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux only")


def sh(command: str, timeout: int = 120) -> tuple[str, bool]:
    return kesi.run_command(command, timeout=timeout)


# --- toolchain caches ----------------------------------------------------------------

def test_uv_run_installs_from_a_local_wheel_into_the_projects_own_cache(box):
    """`uv run` needs a writable cache: it gets .kesi/cache/uv, never ~/.cache/uv."""
    build_wheel(box / "wheels")
    (box / "pyproject.toml").write_text('[project]\nname = "app"\nversion = "0.1"\nrequires-python = ">=3.8"\n'
                                        'dependencies = ["kesidemo"]\n[tool.uv]\nfind-links = ["wheels"]\n'
                                        'package = false\n')
    output, failed = sh('uv run --offline python -c "import kesidemo; print(kesidemo.ANSWER)"')
    assert not failed and "\n42\n" in "\n" + output, output
    assert (box / ".kesi" / "cache" / "uv").is_dir()
    # KeSi made the folder (with its .gitignore), so git never shows the cache.
    assert (box / ".kesi" / ".gitignore").read_text().strip().endswith("*")


def python_with_pip() -> str:
    # The interpreter itself, not a pyenv shim: after pip install the shim
    # rehashes ~/.pyenv/shims, which is read-only in the sandbox (README).
    candidates = [Path(sys.base_prefix) / "bin" / "python3", Path("/usr/bin/python3"), Path("/usr/local/bin/python3")]
    for python in candidates:
        if python.exists() and subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0:
            return str(python)
    pytest.skip("no Python with pip on this machine")


def test_pip_installs_from_a_local_wheel_and_caches_in_the_project(box):
    build_wheel(box / "wheels")
    python = python_with_pip()
    output, failed = sh(f"{python} -m pip install -q --no-index --find-links wheels --target site kesidemo"
                        f" && {python} -m pip cache dir")
    assert not failed and (box / "site" / "kesidemo" / "__init__.py").is_file(), output
    assert output.splitlines()[-2] == str(box / ".kesi" / "cache" / "pip"), output


def test_cache_variables_name_the_project_but_keep_the_users_own_choice(box, monkeypatch):
    monkeypatch.delenv("UV_CACHE_DIR", raising=False)
    monkeypatch.delenv("CARGO_HOME", raising=False)
    monkeypatch.setenv("NPM_CONFIG_CACHE", str(box / "my-npm-cache"))
    env = kesi.command_environment()
    cache = box / ".kesi" / "cache"
    assert env["UV_CACHE_DIR"] == str(cache / "uv") and env["XDG_CACHE_HOME"] == str(cache)
    assert env["CARGO_HOME"] == str(cache / "cargo")
    assert env["NPM_CONFIG_CACHE"] == str(box / "my-npm-cache") and "npm_config_cache" not in env
    with sandbox_forced(None):       # unsandboxed, the user's own caches are theirs to use
        assert "UV_CACHE_DIR" not in kesi.command_environment()


@pytest.mark.parametrize("how", ["u", "ua", "--escalate unsandboxed"])
def test_an_unsandboxed_command_never_sees_the_sandboxs_caches(box, monkeypatch, how):
    """A sandboxed command can write .kesi/cache: a cargo config planted there (a rustc-wrapper) ran as
    the user when a later escalated cargo build found CARGO_HOME pointing at it (issue 25, class 4)."""
    for name in kesi.CACHE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    output, failed = sh("mkdir -p \"$CARGO_HOME\" && echo '[build]' > \"$CARGO_HOME/config.toml\" && env")
    assert not failed and f"CARGO_HOME={box}/.kesi/cache/cargo" in output, output
    command = "env; echo end"
    if how == "--escalate unsandboxed":
        kesi.set_headless_escalation("unsandboxed")
    else:
        kesi.grant_escalation(kesi.command_key(command), "unsandboxed", how == "ua")
    for _ in range(2 if how == "ua" else 1):
        output, failed = sh(command)
        assert not failed and "\nend\n" in output, output
        assert ".kesi/cache" not in output and "XDG_CACHE_HOME" not in output, output
        assert not {line.split("=")[0] for line in output.splitlines()} & set(kesi.CACHE_VARIABLES), output


def test_home_stays_read_only_and_the_users_cache_unwritten(box):
    uv_cache = kesi.HOME_DIR / ".cache" / "uv"
    output, failed = sh("echo planted > ~/kesi-planted.txt")
    assert failed and "Read-only file system" in output, output
    if uv_cache.is_dir():            # readable (uv's interpreters live there), not writable
        output, failed = sh(f"touch '{uv_cache}/kesi-planted'")
        assert failed and "Read-only file system" in output, output
        assert not (uv_cache / "kesi-planted").exists()
    assert not (kesi.HOME_DIR / "kesi-planted.txt").exists()
    assert sh("echo fine > here.txt && cat here.txt")[0].startswith("fine")   # the workspace still is


def test_a_home_under_another_hidden_folder_stays_read_only(box, monkeypatch):
    """~ = /home/ann is hidden, then /home over it: the usual layout. The
    inner folder is no mount point then; remounting /home covers it."""
    home = Path(tempfile.mkdtemp(prefix=".kesi-test-home-", dir="/root" if os.path.isdir("/root") else None))
    try:
        if not home.is_relative_to("/root"):
            pytest.skip("no /root folder to nest a home under")
        (home / ".cargo").mkdir()              # a toolchain: ~ exists inside the sandbox then
        monkeypatch.setattr(kesi, "HOME_DIR", home)
        output, failed = sh(f"echo fine; touch '{home}/planted' || echo blocked")
        assert not failed and output.startswith("fine\n") and "blocked" in output, output
        assert "Read-only file system" in output and not (home / "planted").exists()
    finally:
        shutil.rmtree(home, ignore_errors=True)


# --- git inside the sandbox --------------------------------------------------------------

def git(workspace: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, timeout=30,
                          env=env or os.environ)


@pytest.fixture
def user_gitconfig(box, tmp_path_factory, monkeypatch):
    """The user's global git config, with an identity and things that must stay outside."""
    config = tmp_path_factory.mktemp("gitconfig") / "config"
    config.write_text("[user]\n\tname = Ada Lovelace\n\temail = ada@example.com\n"
                      "[alias]\n\tkesi-alias = log\n[credential]\n\thelper = store\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    for name in kesi.GIT_IDENTITY:
        monkeypatch.delenv(name, raising=False)
    (box / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "a.txt"], ["commit", "-qm", "first"]):
        assert git(box, *args).returncode == 0
    kesi.load_git_identity()            # as main() does at start-up
    yield config
    kesi.GIT_IDENTITY_ENV.clear()


def test_git_commit_inside_the_sandbox_carries_the_users_identity(user_gitconfig, box):
    (box / "a.txt").write_text("fix\n")
    output, failed = sh("git commit -qam 'fix a' && git log -1 --format='%an <%ae> / %cn <%ce>'")   # git alone
    assert not failed and "Ada Lovelace <ada@example.com> / Ada Lovelace <ada@example.com>" in output, output
    # Only the two values came in: the rest of the user's config stayed outside.
    output, _ = sh("git config --get alias.kesi-alias; git config --get credential.helper; echo end")
    assert output.startswith("end"), output
    assert git(box, "log", "-1", "--format=%s %ae").stdout.strip() == "fix a ada@example.com"


def test_a_commit_inside_cannot_plant_hooks_or_hookspath(user_gitconfig, box):
    config = (box / ".git" / "config").read_bytes()
    sh("echo 'touch PWNED' > .git/hooks/pre-commit; git config core.hooksPath evil; "
       "git config --global core.hooksPath evil; echo b > a.txt")
    output, failed = sh("git config core.hooksPath evil")      # config is no git-only subcommand: .git read-only
    assert failed and "hooksPath" not in (box / ".git" / "config").read_text(), output
    output, failed = sh("git commit -qam second")     # git alone: .git writable
    assert not failed, output
    assert not (box / ".git" / "hooks" / "pre-commit").exists()
    assert (box / ".git" / "config").read_bytes() == config and "hooksPath" not in user_gitconfig.read_text()
    assert git(box, "commit", "--allow-empty", "-qm", "outside").returncode == 0 and not (box / "PWNED").exists()


def test_identity_values_with_control_characters_are_dropped(box, tmp_path_factory, monkeypatch):
    config = tmp_path_factory.mktemp("gitconfig") / "config"
    config.write_text("[user]\n\tname = Eve\x1b[2J\n\temail = ok@example.com\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    for name in kesi.GIT_IDENTITY:
        monkeypatch.delenv(name, raising=False)
    kesi.load_git_identity()
    try:
        assert kesi.git_identity_environment() == {"GIT_AUTHOR_EMAIL": "ok@example.com",
                                                   "GIT_COMMITTER_EMAIL": "ok@example.com"}
    finally:
        kesi.GIT_IDENTITY_ENV.clear()


# --- what KeSi says the sandbox allows ------------------------------------------------------

def test_startup_line_and_system_prompt_say_what_the_sandbox_allows(user_gitconfig, box, mock_client):
    mock, _ = mock_client([reply("hi")])
    done = subprocess.run([sys.executable, KESI], cwd=box, env=child_env(mock), input="hello\n",
                          capture_output=True, text=True, timeout=90)
    assert "sandbox:   on (bubblewrap)\n             allows: writes to the workspace, /tmp and caches in " \
           ".kesi/cache (home read-only), git commit as ada@example.com, background tasks (sharing one " \
           "loopback network)\n" in done.stdout, done.stdout
    system = " ".join(block["text"] for block in mock.requests[0]["body"]["system"])
    assert kesi.SANDBOX_ALLOWS in system and kesi.BACKGROUND_LINES["bubblewrap"] in system


def test_the_prompt_does_not_promise_sandbox_caches_when_there_is_no_sandbox(ws):
    with sandbox_forced(None):
        block = kesi.environment_block()
    assert kesi.SANDBOX_ALLOWS not in block and kesi.BACKGROUND_LINES[None] in block


def test_the_macos_profile_has_the_same_policy_as_text(ws):
    """Checked as text (no Mac here): caches land in the workspace, which the
    profile lets commands write; home is not writable; a background task may
    not write .git at all, nor may a foreground command that runs more than git."""
    with sandbox_forced("seatbelt"):
        env = kesi.command_environment()
        foreground, params = kesi.sandbox_spec()
        background, git_params = kesi.sandbox_spec(git_read_only=True)
        argv = kesi.shell_argv("npm run dev", background=True)
    assert env["UV_CACHE_DIR"] == str(ws / ".kesi" / "cache" / "uv")
    writable = '(allow file-write* (subpath (param "BASE_DIR")) (subpath (param "TMP_DIR"))'
    assert "(deny file-write*)" in foreground and writable in foreground and "HOME_DIR" not in writable
    git_rule = '(deny file-write* (subpath (param "GIT_DIR_0")))'
    assert git_rule not in foreground and git_rule in background.splitlines()
    assert ("GIT_DIR_0", str(ws / ".git")) in git_params
    records = '(deny file-read* file-write* (subpath (param "RECORDS_DIR")))'
    assert records in foreground.splitlines() and records in background.splitlines()
    assert ("RECORDS_DIR", str(kesi.records_root())) in params
    assert argv[argv.index("-p") + 1] == background and ("BASE_DIR", str(ws)) in params


# --- the whole day, scripted ----------------------------------------------------------

REGISTRY = "registry.test"           # the local index's name, mapped to 127.0.0.1 in the user's settings


@pytest.fixture
def registry(server, config, tmp_path_factory, monkeypatch):
    """A package index on 127.0.0.1 with pytest (and what it needs) and kesidemo,
    as wheels; commands reach it only through KeSi's proxy, as REGISTRY:port,
    which the user's settings allow. Yields its /simple/ URL."""
    folder = tmp_path_factory.mktemp("registry")
    wheels = installed_wheels(folder, "pytest") + [build_wheel(folder)]
    monkeypatch.setattr(IndexServer, "files", simple_index(wheels))
    monkeypatch.setattr(IndexServer, "served", [])
    config({"network": {"allow": [f"{REGISTRY}:{server}"], "resolve": {REGISTRY: "127.0.0.1"}}})
    return f"http://{REGISTRY}:{server}/simple/"


def free_port() -> int:
    """A port no server on this machine holds. Inside the sandbox the session
    has a loopback of its own, so this matters only if that ever changes."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def tool_results(mock) -> list[str]:
    """The text of every tool result KeSi sent back, in order."""
    return [block["content"] for request in mock.requests for block in request["body"]["messages"][-1]["content"]
            if isinstance(block, dict) and block.get("type") == "tool_result"]


@pytest.mark.skipif(shutil.which("uv") is None or shutil.which("curl") is None, reason="needs uv and curl")
def test_a_scripted_session_does_everyday_work_in_the_sandbox(user_gitconfig, box, registry, mock_client):
    """kesi.py itself, sandbox on (no KESI_SANDBOX=off): `uv run pytest` fails,
    edit_file fixes the code, `uv run pytest` passes, `git commit`s the fix,
    `uv pip install`s a package; pytest and the package come from a local
    index through the allowlist proxy. Then a background server, queried by
    a second command with curl, and stopped. The audit log tells the story."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"    # the wheels were packed for this Python
    (box / "pyproject.toml").write_text(
        f'[project]\nname = "app"\nversion = "0.1"\nrequires-python = "=={version}.*"\n'
        f'[dependency-groups]\ndev = ["pytest"]\n'
        f'[tool.uv]\npackage = false\nenvironments = ["sys_platform == \'linux\'"]\n'
        f'[[tool.uv.index]]\nurl = "{registry}"\ndefault = true\n')
    (box / "app.py").write_text("def add(a, b):\n    return a - b\n")
    (box / "test_app.py").write_text("from app import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    assert git(box, "add", "pyproject.toml", "app.py", "test_app.py").returncode == 0
    assert git(box, "commit", "-qm", "add app").returncode == 0
    port, slow = free_port(), 600             # uv resolves in the sandbox on a loaded machine: be generous
    commands = [
        {"command": "uv run pytest -q 2>&1", "timeout": slow},
        {"command": "uv run pytest -q 2>&1", "timeout": slow},
        {"command": "git commit -qam 'add adds' && git log --oneline -1", "timeout": 60},
        {"command": f"uv pip install --index-url {registry} kesidemo 2>&1 && "
                    ".venv/bin/python -c 'import kesidemo; print(\"answer\", kesidemo.ANSWER)'", "timeout": slow},
        {"command": f"exec python3 -m http.server {port} --bind 127.0.0.1", "run_in_background": True},
        {"command": f"for i in $(seq 100); do curl -s -o /dev/null -w 'HTTP %{{http_code}}' "
                    f"http://127.0.0.1:{port}/ && break; sleep 0.1; done"}]
    calls = [("run_command", commands[0]), ("read_file", {"file_path": "app.py"}),
             ("edit_file", {"file_path": "app.py", "old_string": "a - b", "new_string": "a + b"}),
             *[("run_command", step) for step in commands[1:]], ("background_stop", {"id": 1})]
    mock, _ = mock_client([reply(tool_call(name, arguments)) for name, arguments in calls] + [reply("all done")])
    env = child_env(mock, KESI_COMMAND_TIMEOUT=str(slow))
    assert "KESI_SANDBOX" not in env
    done = subprocess.run([sys.executable, KESI, "--permission-mode", "bypassPermissions", "-p", "work"],
                          cwd=box, env=env, capture_output=True, text=True, timeout=4 * slow)
    assert done.returncode == 0 and done.stdout.strip() == "all done", done.stderr

    entries = [json.loads(line) for line in kesi.read_records(records_of(box) / kesi.AUDIT_LOG)[0]]
    assert [e["command"] for e in entries] == [c["command"] for c in commands] + [commands[4]["command"]]
    assert [e["sandbox"] for e in entries] == ["on"] * len(entries), entries
    failing, passing, commit, install, started, query, stopped = entries
    assert failing["exit_code"] == 1 and "1 failed" in failing["output"], failing["output"]
    assert passing["exit_code"] == 0 and "1 passed" in passing["output"], passing["output"]
    assert commit["exit_code"] == 0 and "add adds" in commit["output"], commit
    assert install["exit_code"] == 0 and "answer 42" in install["output"], install["output"]
    assert started["background_task"] == 1 and query["exit_code"] == 0 and "HTTP 200" in query["output"], query
    assert stopped["decision"] == "stopped by the model" and '"GET / HTTP/1.1" 200' in stopped["output"]
    assert all(e["decision"] == "allowed by mode bypassPermissions" for e in entries[:6])

    results = tool_results(mock)
    assert len(results) == len(calls) and "1 failed" in results[0] and "1 passed" in results[3], results
    assert results[2].startswith("Edited app.py") and "answer 42" in results[5], results
    assert (box / "app.py").read_text() == "def add(a, b):\n    return a + b\n"
    # The fix is committed, by the user, and nothing else is.
    assert git(box, "log", "-1", "--format=%s|%an").stdout.strip() == "add adds|Ada Lovelace"
    assert git(box, "show", "--name-only", "--format=", "HEAD").stdout.split() == ["app.py"]
    # The packages came from the local index, which the sandbox reaches only through the proxy.
    served = set(IndexServer.served)
    assert {"/simple/pytest/", "/simple/kesidemo/", "/files/kesidemo-1.0-py3-none-any.whl"} <= served, served
    assert any(path.startswith("/files/pytest-") for path in served), served
    assert (box / ".kesi" / "cache" / "uv").is_dir()


@pytest.mark.parametrize("entry", [".venv/bin", "bin", "."])
@pytest.mark.parametrize("mode", ["readOnly", "plan", "default"])
def test_a_read_only_command_never_runs_a_program_planted_in_a_workspace_folder_on_path(box, main_in_process,
                                                                                         monkeypatch, mode, entry):
    """rt25 67-68: with a workspace folder on your PATH (an activated .venv/bin, direnv's bin, `.`), `ls` and a
    background `tail -f` ran what an earlier command planted there, unasked, in every mode. Read-only commands, the
    ones that run unasked and outlive /mode readOnly, now find their programs outside the workspace only."""
    folder = box / entry
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ls", "tail"):
        (folder / name).write_text(f"#!/bin/sh\necho {name} >> {box}/pwned.txt\n")
        (folder / name).chmod(0o755)
    (box / "log.txt").write_text("one\n")
    monkeypatch.setenv("PATH", (entry if entry == "." else str(folder)) + os.pathsep + os.environ["PATH"])
    calls = [reply(tool_call("run_command", {"command": "ls"})),
             reply(tool_call("run_command", {"command": "tail -f log.txt", "run_in_background": True})),
             reply(tool_call("run_command", {"command": "tail -n 1 log.txt"})), "done"]
    with MockAPI(calls) as mock:
        code, out, err = main_in_process(["-p", "go", "--permission-mode", mode], "", mock, KESI_SANDBOX="auto")
    kesi.stop_background_tasks()
    assert code == 0, err
    assert "log.txt" in out + err and not (box / "pwned.txt").exists(), (out, err)


def test_the_sandboxs_first_process_is_never_an_interpreter_in_the_workspace(box, monkeypatch):
    """rt25 72: KeSi started from the workspace's .venv chose that python as pid 1 of every sandbox, and one command
    could replace it. Now an interpreter in the workspace is never chosen (KeSi's own is resolved at its start)."""
    planted = box / ".venv" / "bin" / "python"
    planted.parent.mkdir(parents=True)
    planted.write_text(f'#!/bin/sh\necho ran >> {box}/pid1-ran.txt\nexec {os.path.realpath(sys.executable)} "$@"\n')
    planted.chmod(0o755)
    monkeypatch.setattr(kesi, "STARTED_PYTHON", str(planted))
    chosen = kesi.forwarder_python()
    output, failed = kesi.run_command("tr '\\0' ' ' < /proc/1/cmdline")
    assert chosen and not kesi.lies_in(Path(chosen), box), chosen
    assert not failed and str(planted) not in output and "-c" in output, output
    assert not (box / "pid1-ran.txt").exists()


def test_what_an_unsandboxed_command_leaves_running_ends_with_it(box, monkeypatch, tmp_path_factory):
    """rt36a 10: a command you let run outside the sandbox left a setsid loop that kept writing after the command,
    /revoke and KeSi's exit (bwrap's pid namespace ends only what runs inside it). KeSi adopts and ends it."""
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    out = tmp_path_factory.mktemp("outside")
    command = (f"setsid sh -c 'echo $$ > {out}/pid; while :; do echo x >> {out}/beat; sleep 0.1; done' "
               f"</dev/null >/dev/null 2>&1 & while [ ! -s {out}/pid ]; do sleep 0.05; done; echo started")
    kesi.grant_escalation(kesi.command_key(command), "unsandboxed", False)
    output, failed = sh(command)
    assert not failed and "started" in output, output
    pid = int((out / "pid").read_text())
    outlived = os.path.exists(f"/proc/{pid}")
    if outlived:
        os.kill(pid, signal.SIGKILL)              # not left to run on after the test
    assert not outlived, "the loop outlived its command"
