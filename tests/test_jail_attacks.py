"""An adversarial battery: path escapes and secret reads through every tool.

One arena is built per module:

    <tmp>/ws/          the jail (a real git repo), holding secrets KeSi must hide:
                       .env, .env.local, config/.env, .git/config, config/.git/config,
                       a committed .env in the git history, and symlinks pointing out
    <tmp>/outside/     a sibling project with its own secret (and a canary file name)
    ~/kesi-battery-*/  a secret under the real home folder (removed afterwards)

Every secret holds its own random canary. Each attempt calls a tool through
kesi.call_tool (the permission layer is skipped on purpose: this tests the
tools and the sandbox themselves) in a thread with a deadline, then asserts:
no canary in the output, no hang, and every secret file byte-for-byte and
mtime unchanged, with no new file outside the jail.

Hard links are a documented gap (a hard link *is* a regular file inside the
jail); they are pinned as strict xfails at the end, so a fix shows up.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

import checklib
import kesi

DEADLINE = 120.0           # seconds; a call still running after this is a hang, not a slow machine
COMMAND_TIMEOUT = 3        # what run_command attempts get (plus KeSi's kill grace)


def canary(label: str) -> str:
    return f"CANARY{label.upper()}{secrets.token_hex(8)}"


CANARIES = {name: canary(name) for name in
            ("outside", "outname", "env", "envlocal", "nested", "git", "nestedgit",
             "home", "gitname", "envvar")}


# --- the arena ---------------------------------------------------------------

def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=cwd, check=True, capture_output=True, timeout=30)


def build_workspace(ws: Path, outside: Path, home_dir: Path) -> None:
    checklib.write_files(ws, {
        "README.md": "a harmless file\n",
        "sub/notes.txt": "notes\n",
        "config/app.toml": "name = 'demo'\n",
    })
    git(ws, "init", "-q")
    checklib.write_files(ws, {".env": f"API_KEY={CANARIES['env']}\n"})
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "oops, committed .env")         # a secret in the history
    with open(ws / ".git" / "config", "a") as f:
        f.write(f"[remote \"origin\"]\n\turl = https://user:{CANARIES['git']}@example.com/r.git\n")
    (ws / ".git" / f"{CANARIES['gitname']}.txt").write_text("a canary file name\n")
    checklib.write_files(ws, {
        ".env.local": f"TOKEN={CANARIES['envlocal']}\n",
        "config/.env": f"DB_PASSWORD={CANARIES['nested']}\n",
        "config/.git/config": f"[user]\n\tpassword = {CANARIES['nestedgit']}\n",
    })
    links = {"link_out_file": outside / "secret.txt", "link_out_dir": outside,
             "link_env": ws / ".env", "link_git": ws / ".git", "link_home": home_dir,
             "sub/link_nested_env": ws / "config" / ".env",
             "dangling_out": outside / "created-through-link.txt"}
    for name, target in links.items():
        (ws / name).symlink_to(target)
    os.mkfifo(ws / "fifo")


@pytest.fixture(scope="module")
def arena(tmp_path_factory):
    root = tmp_path_factory.mktemp("battery").resolve()
    ws, outside = root / "ws", root / "outside"
    ws.mkdir()
    checklib.write_files(outside, {"secret.txt": f"password={CANARIES['outside']}\n",
                                   f"{CANARIES['outname']}.txt": "a canary file name\n"})
    home_dir = Path(os.path.expanduser("~")) / f"kesi-battery-{secrets.token_hex(6)}"
    home_dir.mkdir()
    (home_dir / "secret.txt").write_text(f"ssh-key {CANARIES['home']}\n")
    try:
        build_workspace(ws, outside, home_dir)
        yield {"ws": ws, "outside": outside, "home": home_dir}
    finally:
        shutil.rmtree(home_dir, ignore_errors=True)


def protected_files(arena) -> list[Path]:
    ws = arena["ws"]
    inside = [ws / ".env", ws / ".env.local", ws / "config" / ".env", ws / ".git" / "config",
              ws / "config" / ".git" / "config"]
    outside = [p for top in (arena["outside"], arena["home"]) for p in sorted(top.rglob("*"))]
    return inside + outside


def snapshot(arena) -> dict:
    """Bytes and mtime of every secret, plus the full list of outside files."""
    state = {str(p): (p.read_bytes(), p.stat().st_mtime_ns) for p in protected_files(arena)}
    state["listing"] = sorted(str(p) for top in (arena["outside"], arena["home"]) for p in top.rglob("*"))
    return state


@pytest.fixture
def jail(arena, monkeypatch):
    old = kesi.BASE_DIR
    checklib.fresh_state()
    checklib.use_base_dir(arena["ws"])
    monkeypatch.setattr(kesi, "UI", open(os.devnull, "w"))
    monkeypatch.setenv("KESI_BATTERY_TOKEN", CANARIES["envvar"])   # must be scrubbed for commands
    before = snapshot(arena)
    yield arena
    after = snapshot(arena)
    kesi.UI.close()
    checklib.use_base_dir(old)
    checklib.fresh_state()
    assert after == before, "a protected file outside the tools' reach was changed or created"


# --- the attempts ------------------------------------------------------------
# Each is (id, tool, input). Inputs may use {ws}, {out} and {home}: replaced
# by the absolute arena paths at run time.

ALL = r"CANARY[A-Z]+[0-9a-f]{16}"       # matches any canary without spelling one out
UP = "../" * 12                         # more '..' than the path is deep

READS = [
    ("read-abs-outside", "read_file", {"file_path": "{out}/secret.txt"}),
    ("read-dotdot-outside", "read_file", {"file_path": "../outside/secret.txt"}),
    ("read-sub-dotdot-chain", "read_file", {"file_path": "sub/../../outside/secret.txt"}),
    ("read-long-dotdot-chain", "read_file", {"file_path": UP + "{out}/secret.txt"}),
    ("read-env", "read_file", {"file_path": ".env"}),
    ("read-env-local", "read_file", {"file_path": ".env.local"}),
    ("read-nested-env", "read_file", {"file_path": "config/.env"}),
    ("read-git-config", "read_file", {"file_path": ".git/config"}),
    ("read-nested-git-config", "read_file", {"file_path": "config/.git/config"}),
    ("read-sub-dotdot-env", "read_file", {"file_path": "sub/../.env"}),
    ("read-dot-slash-env", "read_file", {"file_path": "./.env"}),
    ("read-abs-env", "read_file", {"file_path": "{ws}/.env"}),
    ("read-proc-root-env", "read_file", {"file_path": "/proc/self/root{ws}/.env"}),
    ("read-symlink-file-out", "read_file", {"file_path": "link_out_file"}),
    ("read-symlink-dir-out", "read_file", {"file_path": "link_out_dir/secret.txt"}),
    ("read-symlink-to-env", "read_file", {"file_path": "link_env"}),
    ("read-symlink-to-nested-env", "read_file", {"file_path": "sub/link_nested_env"}),
    ("read-symlink-to-git", "read_file", {"file_path": "link_git/config"}),
    ("read-symlink-back-in", "read_file", {"file_path": "link_out_dir/../ws/.env"}),
    ("read-home-tilde", "read_file", {"file_path": "~/{home_name}/secret.txt"}),
    ("read-home-abs", "read_file", {"file_path": "{home}/secret.txt"}),
    ("read-symlink-home", "read_file", {"file_path": "link_home/secret.txt"}),
    ("read-url-encoded", "read_file", {"file_path": "%2e%2e/outside/secret.txt"}),
    ("read-url-encoded-env", "read_file", {"file_path": "%2eenv"}),
    ("read-fullwidth-dots", "read_file", {"file_path": "\uff0e\uff0e/outside/secret.txt"}),
    ("read-one-dot-leader", "read_file", {"file_path": "\u2025/outside/secret.txt"}),
    ("read-fullwidth-env", "read_file", {"file_path": "\uff0eenv"}),
    ("read-zero-width-env", "read_file", {"file_path": ".env\u200b"}),
    ("read-upper-env", "read_file", {"file_path": ".ENV"}),
    ("read-nul-byte", "read_file", {"file_path": ".env\x00README.md"}),
    ("read-backslashes", "read_file", {"file_path": "..\\outside\\secret.txt"}),
    ("read-offset-tricks", "read_file", {"file_path": ".env", "offset": 1, "limit": 1}),
]

LISTINGS = [
    ("list-git", "list_files", {"path": ".git"}),
    ("list-dotdot", "list_files", {"path": ".."}),
    ("list-abs-outside", "list_files", {"path": "{out}"}),
    ("list-symlink-dir-out", "list_files", {"path": "link_out_dir"}),
    ("list-symlink-git", "list_files", {"path": "link_git"}),
    ("list-home", "list_files", {"path": "~"}),
    ("list-root-of-jail", "list_files", {"path": "."}),
    ("list-config", "list_files", {"path": "config"}),
    ("glob-any-env", "glob", {"pattern": "**/.env"}),
    ("glob-dotdot-star", "glob", {"pattern": "../*"}),
    ("glob-dotdot-outside", "glob", {"pattern": "../outside/*"}),
    ("glob-everything", "glob", {"pattern": "**/*"}),
    ("glob-everything-dotted", "glob", {"pattern": "**/.*"}),
    ("glob-through-symlink", "glob", {"pattern": "link_out_dir/*"}),
    ("glob-git-tree", "glob", {"pattern": ".git/**"}),
    ("glob-abs", "glob", {"pattern": "{out}/*"}),
    ("glob-home", "glob", {"pattern": "~/*"}),
    ("glob-class-env", "glob", {"pattern": "**/[.]env*"}),
]

SEARCHES = [
    ("grep-canaries-whole-tree", "grep", {"pattern": ALL}),
    ("grep-canaries-ignore-case", "grep", {"pattern": "canary[a-z]+[0-9A-F]{16}", "ignore_case": True}),
    ("grep-path-dotdot", "grep", {"pattern": ALL, "path": ".."}),
    ("grep-path-env", "grep", {"pattern": ALL, "path": ".env"}),
    ("grep-path-git", "grep", {"pattern": ALL, "path": ".git"}),
    ("grep-path-config", "grep", {"pattern": ALL, "path": "config"}),
    ("grep-path-symlink-dir", "grep", {"pattern": ALL, "path": "link_out_dir"}),
    ("grep-path-symlink-file", "grep", {"pattern": ALL, "path": "link_out_file"}),
    ("grep-path-symlink-env", "grep", {"pattern": ALL, "path": "link_env"}),
    ("grep-path-abs-outside", "grep", {"pattern": ALL, "path": "{out}"}),
    ("grep-path-home", "grep", {"pattern": ALL, "path": "~"}),
    ("grep-glob-env", "grep", {"pattern": ALL, "glob": "**/.env"}),
    ("grep-glob-env-star", "grep", {"pattern": ALL, "glob": ".env*"}),
    ("grep-glob-git", "grep", {"pattern": ALL, "glob": "**/.git/**"}),
    ("grep-glob-dotdot", "grep", {"pattern": ALL, "glob": "../*"}),
    ("grep-glob-braces", "grep", {"pattern": ALL, "glob": "{.env,.env.local,README.md}"}),
    ("grep-pattern-as-option", "grep", {"pattern": "--files", "path": "."}),
    ("grep-path-fifo", "grep", {"pattern": "x", "path": "fifo"}),
]

WRITES = [
    ("edit-env", "edit_file", {"file_path": ".env", "old_string": CANARIES["env"], "new_string": "x"}),
    ("edit-git-config", "edit_file", {"file_path": ".git/config", "old_string": "url", "new_string": "x"}),
    ("edit-outside", "edit_file", {"file_path": "../outside/secret.txt", "old_string": "password", "new_string": "x"}),
    ("edit-abs-outside", "edit_file", {"file_path": "{out}/secret.txt", "old_string": "password", "new_string": "x"}),
    ("edit-symlink-out", "edit_file", {"file_path": "link_out_file", "old_string": "password", "new_string": "x"}),
    ("edit-symlink-env", "edit_file", {"file_path": "link_env", "old_string": "API_KEY", "new_string": "x"}),
    ("edit-fifo", "edit_file", {"file_path": "fifo", "old_string": "a", "new_string": "b"}),
    ("write-env", "write_file", {"file_path": ".env", "content": "pwned\n"}),
    ("write-env-local-nested", "write_file", {"file_path": "config/.env.local", "content": "pwned\n"}),
    ("write-git-config", "write_file", {"file_path": ".git/config", "content": "pwned\n"}),
    ("write-outside", "write_file", {"file_path": "../outside/secret.txt", "content": "pwned\n"}),
    ("write-abs-new-outside", "write_file", {"file_path": "{out}/new.txt", "content": "pwned\n"}),
    ("write-symlink-out", "write_file", {"file_path": "link_out_file", "content": "pwned\n"}),
    ("write-symlink-env", "write_file", {"file_path": "link_env", "content": "pwned\n"}),
    ("write-through-symlink-dir", "write_file", {"file_path": "link_out_dir/new.txt", "content": "pwned\n"}),
    ("write-dangling-symlink-out", "write_file", {"file_path": "dangling_out", "content": "pwned\n"}),
    ("write-home", "write_file", {"file_path": "~/{home_name}/secret.txt", "content": "pwned\n"}),
    ("write-fifo", "write_file", {"file_path": "fifo", "content": "pwned\n"}),
    ("read-fifo", "read_file", {"file_path": "fifo"}),
]

# (id, command, must the permission layer refuse to auto-allow it?)
COMMANDS = [
    ("cat-dotdot-outside", "cat ../outside/secret.txt", True),
    ("cat-abs-outside", "cat {out}/secret.txt", True),
    ("ls-outside", "ls -la ../outside {out}", True),
    ("cat-env", "cat .env", True),
    ("cat-env-local", "cat .env.local", True),
    ("cat-nested-env", "cat config/.env", True),
    ("cat-git-config", "cat .git/config", True),
    ("cat-nested-git-config", "cat config/.git/config", True),
    ("cat-sub-dotdot-env", "head -n 5 sub/../.env", True),
    ("cat-quoted-env", "cat '.e''nv'", True),
    ("cat-home-tilde", "cat ~/{home_name}/secret.txt", True),
    ("cat-home-abs", "cat {home}/secret.txt", True),
    ("cat-symlink-out", "cat link_out_file", True),
    ("cat-symlink-dir-out", "cat link_out_dir/secret.txt", True),
    ("cat-symlink-env", "cat link_env", True),
    ("cat-symlink-home", "cat link_home/secret.txt", True),
    ("python-open-outside", "python3 -c \"print(open('../outside/secret.txt').read())\"", True),
    ("python-open-env", "python3 -c \"print(open('.env').read())\"", True),
    ("python-walk-outside", "python3 -c \"import os; print(os.listdir('..'), os.listdir('{out}'))\"", True),
    ("copy-env-then-read", "cp .env copy.txt; cat copy.txt; rm -f copy.txt", True),
    ("hardlink-env-in-command", "ln .env h.txt; cat h.txt; rm -f h.txt", True),
    ("hardlink-outside-in-command", "ln {out}/secret.txt h2.txt; cat h2.txt; rm -f h2.txt", True),
    ("rename-env", "mv .env moved.txt; cat moved.txt", True),
    ("git-show-committed-env", "git show HEAD:.env", True),
    ("git-log-patch", "git log -p", False),    # auto-allowed: only the sandbox could stop it
    ("git-remote-url", "git remote -v", True),
    ("git-config-list", "git config --list --show-origin", True),
    ("git-status-works", "git status --short", False),
    ("grep-recursive-canaries", "grep -r CANARY . ..", True),
    ("proc-root-of-other-processes",
     "for p in /proc/[0-9]*; do cat $p/root{out}/secret.txt $p/root{home}/secret.txt; done 2>/dev/null; echo done", True),
    ("proc-cwd-of-other-processes", "for p in /proc/[0-9]*; do cat $p/cwd/.env; done 2>/dev/null; echo done", True),
    ("environment-variables", "env; cat /proc/self/environ", True),
    ("write-outside", "echo pwned > ../outside/secret.txt", True),
    ("append-env", "echo pwned >> .env", True),
    ("write-home", "echo pwned > ~/{home_name}/secret.txt", True),
    ("fifo-blocks", "cat fifo", False),        # harmless, but it blocks until the timeout
]


def fill(value, arena):
    """Put the arena's absolute paths into an attempt's input."""
    names = {"ws": arena["ws"], "out": arena["outside"], "home": arena["home"],
             "home_name": arena["home"].name}
    if isinstance(value, str):
        for key, path in names.items():
            value = value.replace("{" + key + "}", str(path))
        return value
    if isinstance(value, dict):
        return {k: fill(v, arena) for k, v in value.items()}
    return value


def call_with_deadline(name: str, tool_input: dict) -> tuple[str, bool]:
    """Run one tool call in a thread; fail (not block the suite) if it hangs."""
    box = {}

    def target():
        try:
            box["result"] = kesi.call_tool({"name": name, "input": tool_input})
        except BaseException as exc:   # call_tool promises never to raise
            box["raised"] = exc

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(DEADLINE)
    assert not worker.is_alive(), f"{name}({tool_input!r}) hung for more than {DEADLINE} s"
    assert "raised" not in box, f"{name} raised {box.get('raised')!r}"
    return box["result"]


def assert_no_leak(result) -> None:
    output, is_error = result
    assert isinstance(output, str) and isinstance(is_error, bool)
    leaked = [label for label, value in CANARIES.items() if value.lower() in output.lower()]
    assert not leaked, f"LEAK of {leaked}:\n{output[:2000]}"


FILE_ATTEMPTS = READS + LISTINGS + SEARCHES + WRITES


@pytest.mark.parametrize("name,tool_input", [a[1:] for a in FILE_ATTEMPTS], ids=[a[0] for a in FILE_ATTEMPTS])
def test_file_tool_attempt(jail, name, tool_input):
    result = call_with_deadline(name, fill(tool_input, jail))
    assert_no_leak(result)
    if name in ("read_file", "edit_file", "write_file"):
        assert result[1] is True, f"{name} should have refused: {result[0]}"


def test_jail_still_usable(jail):
    """Control: the battery is not passing because the tools are simply broken."""
    assert call_with_deadline("read_file", {"file_path": "sub/notes.txt"}) == ("     1\tnotes", False)
    listing, is_error = call_with_deadline("list_files", {"path": "."})
    assert not is_error and "README.md" in listing and "sub/" in listing
    assert ".env" not in listing and "link_out_dir" not in listing and "link_env" not in listing
    found, is_error = call_with_deadline("grep", {"pattern": "harmless"})
    assert (found, is_error) == ("README.md:1:a harmless file", False)


def sandbox_or_skip():
    if kesi.sandbox_kind() is None:
        pytest.skip("no usable OS sandbox here (bwrap / sandbox-exec), or KESI_SANDBOX=off")


# LEAKS found by this battery and reported, not yet fixed: the sandbox hides
# the .env *path*, but a .env that was ever committed is in .git/objects, and
# git (which must keep working) prints it. Strict xfail: a fix turns them red.
COMMITTED_SECRET = pytest.mark.xfail(strict=True, reason=(
    "LEAK (reported): a committed .env is readable through git's object store; "
    "'git log -p' is even auto-allowed"))
KNOWN_LEAKS = {"git-show-committed-env": COMMITTED_SECRET, "git-log-patch": COMMITTED_SECRET}


@pytest.mark.parametrize("command", [pytest.param(c[1], id=c[0], marks=KNOWN_LEAKS.get(c[0], ()))
                                     for c in COMMANDS])
def test_command_attempt_in_sandbox(jail, command):
    sandbox_or_skip()
    # call_with_deadline fails a command that outlives its timeout and grace (a hang).
    result = call_with_deadline("run_command", {"command": fill(command, jail), "timeout": COMMAND_TIMEOUT})
    assert_no_leak(result)


GATED = [c for c in COMMANDS if c[2]]


@pytest.mark.parametrize("command", [c[1] for c in GATED], ids=[c[0] for c in GATED])
def test_command_is_not_auto_allowed(jail, command):
    verdict, reason = kesi.classify_command(fill(command, jail))
    assert verdict in ("ask", "deny"), f"auto-allowed: {reason}"


def test_sandbox_control_really_reads(jail):
    """Control: the same cat works on a normal file, so the blocks above are the sandbox's doing."""
    sandbox_or_skip()
    output, is_error = call_with_deadline("run_command", {"command": "cat sub/notes.txt"})
    assert (output, is_error) == ("notes\n(exit code 0)", False)


# --- known gap: hard links -----------------------------------------------------
# A hard link to a secret is an ordinary file inside the jail: neither the path
# checks nor the sandbox (which hides paths, not inodes) can tell. Documented as
# KNOWN in the series; strict xfail, so closing the gap makes these tests fail
# and asks for the docs to be updated.

@pytest.fixture
def hard_links(jail):
    made = []
    for name, target in (("hard_out.txt", jail["outside"] / "secret.txt"), ("hard_env.txt", jail["ws"] / ".env")):
        try:
            os.link(target, jail["ws"] / name)
        except OSError as exc:
            pytest.skip(f"cannot make a hard link here: {exc}")
        made.append(jail["ws"] / name)
    yield made
    for path in made:
        path.unlink()


@pytest.mark.xfail(strict=True, reason="KNOWN: a hard link to a secret is a regular file inside the jail")
@pytest.mark.parametrize("name", ["hard_out.txt", "hard_env.txt"])
def test_known_gap_hard_link_read_file(hard_links, name):
    assert_no_leak(call_with_deadline("read_file", {"file_path": name}))


@pytest.mark.xfail(strict=True, reason="KNOWN: the sandbox hides paths, not inodes")
def test_known_gap_hard_link_in_sandbox(hard_links):
    sandbox_or_skip()
    assert_no_leak(call_with_deadline("run_command", {"command": "cat hard_out.txt"}))
