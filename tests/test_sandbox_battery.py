"""The sandbox against the red team's classes, each attacked for real in
bubblewrap: processes that try to outlive their command or reach outside,
/proc/sys, other programs' sockets, git's control files (persistence that
runs later, outside the sandbox), and a flood of processes.

Every attempt is counted; the battery reports how many leaked and must
report 0. Markers are unique per run, and "is it still alive" is answered
from /proc by that marker, never by a process name.
"""
import base64
import errno
import glob
import io
import fcntl
import os
import shutil
import signal
import socket
import stat
import string
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import checklib
import kesi

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux only")
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@x"}


@pytest.fixture(params=["on", "off"])
def box_or_bare(request, box, monkeypatch):
    """The same workspace with the sandbox on, and with it off: the checks
    after each command must hold without the sandbox too."""
    if request.param == "off":
        monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)
    return box


@pytest.fixture
def bare(box, monkeypatch):
    """The sandbox off: the check after a command is all there is, as for a git-only command inside."""
    monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)
    return box


def nested_repository(root: Path) -> Path:
    (root / "vendor" / "lib").mkdir(parents=True)
    make_repo(root / "vendor" / "lib")
    return root / "vendor" / "lib"


def sh(command: str) -> tuple[str, bool]:
    return kesi.run_command(command, timeout=30)


def marker_alive(marker: str) -> bool:
    """A live process whose command line holds this run's unique marker."""
    for entry in Path("/proc").iterdir():
        try:
            if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    return True
        except (OSError, IndexError):
            continue
    return False


def git(workspace: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=workspace, env={**os.environ, **GIT_ENV},
                          capture_output=True, text=True, timeout=30)


def make_repo(workspace: Path) -> None:
    (workspace / "a.txt").write_text("a\n")
    for args in (["init", "-q"], ["add", "a.txt"], ["commit", "-qm", "first"]):
        assert git(workspace, *args).returncode == 0


# --- class 4: nothing outlives its command, nothing outside is reachable ---------------

ESCAPES = [
    "setsid sleep {s} > /dev/null 2>&1 &",
    "(setsid sleep {s} &) ; true",
    "nohup sleep {s} > /dev/null 2>&1 &",
    "python3 -c 'import os,time; os.setpgid(0,0); os.fork() or time.sleep({s})' &",
    "python3 -c 'import os,time\nif os.fork(): os._exit(0)\nos.setsid(); time.sleep({s})' ; true",
    "sh -c 'trap \"\" HUP TERM; sleep {s}' &",
    "(trap '' TERM INT HUP; exec sleep {s}) & disown 2>/dev/null; true",
]


@pytest.mark.parametrize("template", ESCAPES)
def test_no_process_outlives_its_command(box, template):
    seconds = f"3{uuid.uuid4().int % 10**6}.5"          # sleep's argument is the marker
    output, _ = sh(template.format(s=seconds))
    assert not marker_alive(seconds), output


def test_outside_processes_cannot_be_seen_signalled_or_read(box):
    outside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--password=hunter2"])
    try:
        me, it = os.getpid(), outside.pid
        attempts = {
            f"kill -0 {it} && echo SIGNALLED": "SIGNALLED",
            f"cat /proc/{it}/cmdline | tr '\\0' ' '; echo": "hunter2",
            f"kill -STOP {me} && echo SIGNALLED": "SIGNALLED",
            f"renice -n 5 -p {me} && echo RENICED": "RENICED",
            f"cat /proc/{me}/cmdline | tr '\\0' ' '; echo": "pytest",
            f"cat /proc/{me}/environ | tr '\\0' '\\n' | head -3": "=",
            "ps -eo args 2>/dev/null | grep -c pytest || ls /proc | grep -c '^[0-9]'": None,
        }
        leaks = []
        for command, leak in attempts.items():
            output, _ = sh(command)
            if leak is None:
                counted = [line for line in output.splitlines() if line.strip().isdigit()]
                if counted and int(counted[0]) > 10:
                    leaks.append((command, output))
            elif leak in output.split("(exit code")[0]:
                leaks.append((command, output))
        assert outside.poll() is None
        assert leaks == []
    finally:
        outside.kill()
        outside.wait()


@pytest.mark.parametrize("target", ["kernel/core_pattern", "kernel/hostname", "vm/drop_caches"])
def test_proc_sys_is_read_only(box, target):
    before = Path(f"/proc/sys/{target}").read_text() if target != "vm/drop_caches" else None
    output, failed = sh(f"echo '|/tmp/pwned' > /proc/sys/{target} && echo WROTE")
    assert failed and "WROTE" not in output
    if before is not None:
        assert Path(f"/proc/sys/{target}").read_text() == before


def test_capabilities_are_dropped(box):
    output, _ = sh("grep CapEff /proc/self/status")
    assert "CapEff:\t0000000000000000" in output, output


# --- class 5: other programs' sockets -------------------------------------------------

def unix_listener(path: str) -> socket.socket:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(4)
    return server


def connect_probe(path: str) -> str:
    return (f"python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{path}'); "
            f"print('CONNECTED')\"")


def test_sockets_outside_the_workspace_are_unreachable(box, monkeypatch):
    folders = [Path(tempfile.mkdtemp(prefix="kesi-run-", dir="/run")) if os.access("/run", os.W_OK) else None,
               Path(tempfile.mkdtemp(prefix="kesi-xdg-", dir="/var/tmp"))]
    folders = [f for f in folders if f is not None]
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(folders[-1]))
    servers = [unix_listener(str(folder / "bus")) for folder in folders]
    abstract, name = socket.socket(socket.AF_UNIX), f"kesi-test-{uuid.uuid4().hex}"
    abstract.bind("\0" + name)
    abstract.listen(4)
    try:
        attempts = [connect_probe(str(folder / "bus")) for folder in folders]
        attempts.append(connect_probe("\\0" + name))
        leaks = [(c, out) for c in attempts if "CONNECTED" in (out := sh(c)[0])]
        assert leaks == []
    finally:
        for server in [*servers, abstract]:
            server.close()
        for folder in folders:
            subprocess.run(["rm", "-rf", str(folder)])


def test_sockets_in_folders_every_user_may_write_are_unreachable(box):
    """Issue 23: a service's socket in /var/tmp was reachable. Also /dev/shm, and a folder any
    user may write one or two levels below /var (made here only when the test may write /var)."""
    folders = [Path(tempfile.mkdtemp(dir="/var/tmp")), Path(tempfile.mkdtemp(dir="/dev/shm"))]
    if os.access("/var", os.W_OK):
        top = Path(tempfile.mkdtemp(prefix="kesi-spool-", dir="/var"))
        os.chmod(top, 0o755)
        (top / "public").mkdir(mode=0o777)
        os.chmod(top / "public", 0o1777)
        folders.append(top / "public")
    servers = [unix_listener(str(folder / "x.sock")) for folder in folders]
    try:
        leaks = [folder for folder in folders if "CONNECTED" in sh(connect_probe(str(folder / "x.sock")))[0]]
        assert leaks == []
        # KeSi's own proxy socket stays reachable: a command still gets to the allowlist proxy.
        assert "CONNECTED" in sh(connect_probe(kesi.PROXY_SOCKET_INSIDE))[0] or not kesi.proxy_port()
    finally:
        for server in servers:
            server.close()
        for folder in folders:
            subprocess.run(["rm", "-rf", str(folder.parent if folder.name == "public" else folder)])


# --- round 3: KeSi's own helpers are never taken from a folder commands can write ------

HELPERS = ("bwrap", "nsenter", "git", "rg", "cat", "true")


def plant_helpers(box: Path, folder: Path) -> Path:
    """A repository, and scripts named as KeSi's helpers in folder, written by a command; each run notes itself in
    the file returned."""
    marker = box.parent / f"helper-ran-{uuid.uuid4().hex}"
    plant = " && ".join(f"printf '#!/bin/sh\\necho {name} >> {marker}\\nexec /usr/bin/{name} \"$@\"\\n' > "
                        f"'{folder}/{name}' && chmod +x '{folder}/{name}'" for name in HELPERS)
    make_repo(box)
    output, failed = sh(plant + " && echo planted")
    assert "planted" in output and not failed, output
    checklib.forget_shared_network()                  # the session's network is made again, after the plant
    return marker


@pytest.mark.parametrize("entry", ["{ws}/.venv/bin", "node_modules/.bin", ""])
def test_helpers_planted_on_path_never_run(box, monkeypatch, entry):
    """An activated project venv, a relative entry, the empty entry (the
    current folder): a command plants bwrap, git, rg... there, and KeSi's
    next command, search and git check must not run them outside."""
    folder = box / (entry.format(ws=box) if entry else "")
    folder.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("PATH", f"{entry.format(ws=box)}:{os.environ['PATH']}")
    marker = plant_helpers(box, folder)
    for _ in range(2):
        sh("echo second command")
    kesi.call_tool({"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "a"}})
    assert not marker.exists(), marker.read_text()


def test_helpers_linked_from_outside_into_the_workspace_never_run(box, monkeypatch, tmp_path_factory):
    """rt37a 20: ~/.local/bin/rg -> ~/src/ripgrep/target/release/rg (a build in the workspace): the PATH folder lies
    outside, its program inside, where a command rewrote it; KeSi's next search ran it as the person."""
    links, tools = tmp_path_factory.mktemp("linked-bin"), box / "tools"
    tools.mkdir()
    for name in HELPERS:
        (links / name).symlink_to(tools / name)
    monkeypatch.setenv("PATH", f"{links}:{os.environ['PATH']}")
    marker = plant_helpers(box, tools)
    assert all(not kesi.trusted_program(name).startswith(str(links)) for name in HELPERS)
    sh("git status >/dev/null; echo second command")
    kesi.call_tool({"type": "tool_use", "id": "t1", "name": "grep", "input": {"pattern": "a"}})
    assert not marker.exists(), marker.read_text()


def test_a_helper_is_run_by_the_real_path_checked_not_a_link_a_command_can_repoint(ws, monkeypatch, tmp_path_factory):
    """rt37d B6: ~/.local/bin/rg -> $WS/tools/rg -> /usr/bin/rg when KeSi started: the check passed, and the link was
    run; a command then made tools/rg a script, and the grep tool ran it outside the sandbox."""
    links, tools = tmp_path_factory.mktemp("linked-bin"), ws / "tools"
    tools.mkdir()
    real = os.path.realpath(shutil.which("true"))
    (tools / "true").symlink_to(real)
    (links / "true").symlink_to(tools / "true")
    monkeypatch.setenv("PATH", f"{links}:{os.environ['PATH']}")
    assert kesi.trusted_program("true") == real


def test_a_path_entry_that_links_into_the_system_is_followed_to_its_real_folder(ws, monkeypatch, tmp_path_factory):
    """$WS/ubin -> /usr/bin passes the check, but a command could swap the
    link for its own folder later: KeSi keeps the real folder's path."""
    outside = tmp_path_factory.mktemp("real-bin")
    (outside / "rg").symlink_to(kesi.RG_PATH or "/bin/true")
    (ws / "ubin").symlink_to(outside)
    monkeypatch.setenv("PATH", f"{ws}/ubin:{os.environ['PATH']}")
    found = kesi.trusted_program("rg")
    assert found and not found.startswith(str(ws)), found


def test_a_fifo_named_like_a_git_file_hangs_nothing(box_or_bare):
    box = box_or_bare
    """KeSi reads .git files and commondir before every command, outside the
    sandbox: a FIFO there must not make it wait for a writer."""
    import threading
    make_repo(box)
    (box / "sub").mkdir()
    os.mkfifo(box / "sub" / ".git")
    results = []
    worker = threading.Thread(target=lambda: results.append(sh("echo still-running")), daemon=True)
    worker.start()
    worker.join(120)                     # a hang guard, far beyond the command's own time
    assert results and "still-running" in results[0][0], results


# --- class 1: git persistence ---------------------------------------------------------

PLANTS = [
    "echo 'touch ../PWNED' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit",
    "mkdir -p .git/hooks/x && true; ln -sf /tmp/evil .git/hooks/post-checkout",
    "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > .git/config",
    "mkdir -p gd && printf '[core]\\n\\tfsmonitor = touch PWNED\\n\\trepositoryformatversion = 0\\n' > gd/config;"
    " echo \"$PWD/gd\" > .git/commondir",
    "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > .git/config.worktree",
    "mv .git .git-old && git init -q && git config core.fsmonitor 'touch PWNED'",
    "rm -rf .git/hooks && mkdir .git/hooks && echo 'touch PWNED' > .git/hooks/pre-commit",
    "ln -sf ../evil-config .git/commondir",
    "git config core.hooksPath evil-hooks; mkdir -p evil-hooks; echo 'touch PWNED' > evil-hooks/pre-commit",
]


@pytest.mark.parametrize("plant", PLANTS)
def test_planted_git_config_and_hooks_never_run_outside(box, plant):
    make_repo(box)
    sh(plant)
    (box / "a.txt").write_text("changed\n")
    status = git(box, "status", "--short")
    commit = git(box, "commit", "-qam", "second")
    assert not (box / "PWNED").exists(), (status, commit)
    assert commit.returncode == 0, commit.stderr


def test_changes_to_control_files_are_put_back_and_reported(bare):
    box = bare
    make_repo(box)
    config = (box / ".git" / "config").read_bytes()
    output, failed = sh("echo gd > .git/commondir; echo x > .git/config.worktree; echo ok")
    assert failed and "KeSi put back .git/commondir, .git/config.worktree" in output, output
    assert not (box / ".git" / "commondir").exists() and not (box / ".git" / "config.worktree").exists()
    assert (box / ".git" / "config").read_bytes() == config


def test_a_git_file_pointing_at_a_planted_config_runs_no_fsmonitor_inside(box):
    (box / "gd").mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(box / "gd")], check=True)
    with open(box / "gd" / "config", "a") as f:
        f.write("[core]\n\tbare = false\n\tfsmonitor = touch PWNED-INSIDE\n")
    (box / ".git").write_text("gitdir: gd\n")
    output, _ = sh("git status --short; echo done")
    assert "done" in output and not (box / "PWNED-INSIDE").exists(), output


def test_everyday_git_works_in_the_sandbox(box, monkeypatch):
    """Git on its own writes .git; with another program in the same command it may not (issue 22): split it."""
    make_repo(box)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    output, failed = sh("echo b > b.txt && git add b.txt")
    assert failed and "Read-only file system" in output and "run the git command on its own" in output, output
    output, failed = sh("git add b.txt && git commit -qm second && git log --oneline && git diff HEAD~1 --stat && "
                        "git status --short")
    assert not failed and "second" in output and "b.txt" in output, output
    assert "second" in git(box, "log", "--oneline").stdout


# --- class 8: a flood of processes ----------------------------------------------------

def test_too_many_processes_stop_the_command(box):
    seconds = f"29.{uuid.uuid4().int % 10**8:08d}"             # a marker no other run of the suite has
    output, failed = sh(f"for i in $(seq 400); do sleep {seconds} & done; wait; echo finished")
    assert failed and f"more than {kesi.MAX_PROCESSES} processes" in output and "finished" not in output
    assert not marker_alive(seconds)


def test_a_parallel_job_below_the_limit_runs(box):
    output, failed = sh("for i in $(seq 40); do sleep 0.3 & done; wait; echo finished")
    assert not failed and "finished" in output, output


# --- class 6: masks hold for submodules ---------------------------------------------

def test_submodule_configs_are_masked(box):
    make_repo(box)
    for name in ("lib", "nested/deep"):
        module = box / ".git" / "modules" / name
        module.mkdir(parents=True)
        (module / "HEAD").write_text("ref: refs/heads/main\n")
        (module / "config").write_text("[remote \"origin\"]\n\turl = https://u:ghp_submodule@example.com/r\n")
    output, _ = sh("cat .git/modules/lib/config .git/modules/nested/deep/config; grep -r ghp_ .git/modules; echo end")
    assert "ghp_submodule" not in output and "end" in output, output


@pytest.mark.parametrize("rel", ["node_modules/pkg/.env", "node_modules/a/b/c/.env.local", ".venv/lib/.ENV",
                                 "cfg/.ENV", "deep/x/.Env.production", "build/cache/.env",
                                 # round 3: a .env folder in a dependency, KeSi's caches, inside .git
                                 "node_modules/pkg/.env/key", "node_modules/pkg/.ENV.d/x/key",
                                 ".kesi/cache/x/.env", ".git/x/.env"])
def test_env_files_are_masked_at_any_depth_and_in_any_case(box, rel):
    (box / rel).parent.mkdir(parents=True, exist_ok=True)
    (box / rel).write_text("CANARY_SECRET=tok-e2f1\n")
    output, _ = sh(f"cat '{rel}'; grep -r tok-e2f1 . 2>/dev/null; echo end")
    assert "tok-e2f1" not in output and "end" in output, output


# --- round 2: classes an outside red team found open (our own variants) --------------
# Each plant runs in the sandbox; then the person's own git runs outside, as it
# would later, and must run nothing the command planted.

FSMONITOR = "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> {}"
EVIL_GITDIR = ("git init -q --bare {d} && printf '[core]\\n\\tbare = false\\n\\tfsmonitor = touch PWNED\\n' "
               ">> {d}/config")


def git_everywhere(root: Path) -> str:
    """What the person runs later, outside: status (fsmonitor), a commit (hooks)."""
    (root / "a.txt").write_text(f"changed {uuid.uuid4()}\n")
    outputs = [git(root, "status", "--short"), git(root, "commit", "-qam", "later")]
    return " | ".join(p.stdout + p.stderr for p in outputs)


def pwned(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("PWNED")]


@pytest.fixture
def worktree(box):
    """The workspace is a linked worktree: its .git is a file pointing at a
    repository outside, in a folder the sandbox leaves readable (not /tmp,
    not home), as a checkout under /work or /srv would be."""
    if not os.access("/srv", os.W_OK):       # /var/tmp, writable by all, is hidden inside: the tests saw nothing
        pytest.skip("no writable /srv to keep a repository the sandbox can read")
    main = Path(tempfile.mkdtemp(prefix="kesi-main-repo-", dir="/srv"))
    make_repo(main)
    git(main, "config", "kesi.canary", "maincanary-91c4")      # not a credential format: no output mask
    wt = box / "wt"
    assert git(main, "worktree", "add", "-q", str(wt)).returncode == 0
    old = kesi.BASE_DIR
    kesi.BASE_DIR = wt
    yield main, wt
    kesi.BASE_DIR = old
    subprocess.run(["rm", "-rf", str(main)], check=False)


@pytest.mark.parametrize("plant", [
    EVIL_GITDIR.format(d="evilgd") + " && printf 'gitdir: evilgd\\n' > .git",
    "rm -f .git && git init -q && git config core.fsmonitor 'touch PWNED'",
    "mv .git .git-aside && git init -q && git config core.fsmonitor 'touch PWNED'",
])
def test_a_linked_worktree_keeps_its_git_file(worktree, plant):
    main, wt = worktree
    pointer = (wt / ".git").read_text()
    sh(plant)
    later = git_everywhere(wt)
    assert (wt / ".git").read_text() == pointer and not pwned(main, wt), later


def test_the_main_repository_config_of_a_worktree_is_masked(worktree):
    main, _ = worktree
    output, _ = sh(f"cat {main}/.git/HEAD; cat {main}/.git/config; git config --get kesi.canary; echo end")
    assert "ref: refs/heads/" in output, output      # the main repository is seen inside: the mask is what holds
    assert "maincanary-91c4" not in output and "end" in output, output


def test_the_folder_core_hookspath_names_is_read_only(box):
    make_repo(box)
    (box / ".githooks").mkdir()
    git(box, "config", "core.hooksPath", ".githooks")
    sh("echo 'touch PWNED' > .githooks/pre-commit; chmod +x .githooks/pre-commit")
    later = git_everywhere(box)
    assert not pwned(box) and not (box / ".githooks" / "pre-commit").exists(), later


def test_a_file_the_config_includes_is_read_only(box):
    make_repo(box)
    (box / "team.gitconfig").write_text("[user]\n\tname = team\n")
    git(box, "config", "include.path", "../team.gitconfig")
    sh(FSMONITOR.format("team.gitconfig"))
    later = git_everywhere(box)
    assert not pwned(box) and "fsmonitor" not in (box / "team.gitconfig").read_text(), later


# Round 3: what git's config names, wherever it is named, whether it exists yet or not.

def include_chain(root: Path) -> None:
    """.git/config includes conf/team.cfg, which includes conf/more.cfg."""
    (root / "conf").mkdir()
    (root / "conf" / "team.cfg").write_text("[include]\n\tpath = more.cfg\n")
    (root / "conf" / "more.cfg").write_text("[user]\n\tname = team\n")
    git(root, "config", "include.path", "../conf/team.cfg")


NAMED_PLANTS = {
    "an include that does not exist yet": (
        lambda root: git(root, "config", "include.path", "../later/extra.cfg"),
        "mkdir -p later && " + FSMONITOR.format("later/extra.cfg")),
    "an include inside an include": (include_chain, FSMONITOR.format("conf/more.cfg")),
    "an include made a link": (include_chain, "mv conf conf.old && mkdir elsewhere && "
                               + FSMONITOR.format("elsewhere/team.cfg") + " && ln -s elsewhere conf"),
    "a hooks folder that does not exist yet": (
        lambda root: git(root, "config", "core.hooksPath", "tools/hooks"),
        "mkdir -p tools/hooks && echo 'touch PWNED' > tools/hooks/pre-commit && chmod +x tools/hooks/pre-commit"),
    "a hooks folder spelled with ~": (
        lambda root: git(root, "config", "core.hooksPath", f"~/{root.name}/.hooks"),
        "mkdir -p .hooks && echo 'touch PWNED' > .hooks/pre-commit && chmod +x .hooks/pre-commit"),
    "a hooks folder named in an include": (
        lambda root: ((root / "team.cfg").write_text("[core]\n\thooksPath = .team-hooks\n"),
                      git(root, "config", "include.path", "../team.cfg")),
        "mkdir -p .team-hooks && echo 'touch PWNED' > .team-hooks/pre-commit && chmod +x .team-hooks/pre-commit"),
    "a hook linked to a script in the work tree": (
        lambda root: ((root / "scripts").mkdir(), (root / "scripts" / "check.sh").write_text("#!/bin/sh\ntrue\n"),
                      (root / "scripts" / "check.sh").chmod(0o755),
                      (root / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/check.sh")),
        "echo 'touch PWNED' >> scripts/check.sh"),
}


@pytest.mark.parametrize("name", NAMED_PLANTS)
def test_what_git_config_names_is_guarded_wherever_it_is(box_or_bare, monkeypatch, name):
    box = box_or_bare
    make_repo(box)
    monkeypatch.setenv("HOME", str(box.parent))        # ~/<workspace>/.hooks is in the workspace
    prepare, plant = NAMED_PLANTS[name]
    prepare(box)
    output, _ = sh(plant + "; echo planted")
    later = git_everywhere(box)
    assert "planted" in output and not pwned(box, box.parent), (output, later)


# rt22k: the keys git-config(1) documents as a command or a program's path, beyond the usual ones.
PROGRAM_KEYS = {"interactive.diffFilter": "tools/run.sh", "tar.tgz.command": "tools/run.sh",
                "trailer.sign.command": "tools/run.sh", "submodule.lib.update": "!sh tools/run.sh",
                "hook.lint.command": "tools/run.sh", "man.viewer.cmd": "tools/run.sh"}


@pytest.mark.parametrize("key", PROGRAM_KEYS)
def test_a_program_any_config_key_names_is_guarded(box_or_bare, key):
    box = box_or_bare
    make_repo(box)
    (box / "tools").mkdir()
    (box / "tools" / "run.sh").write_text("#!/bin/sh\ntrue\n")
    git(box, "config", key, PROGRAM_KEYS[key])
    output, _ = sh("echo 'touch PWNED' >> tools/run.sh; echo planted")
    assert "planted" in output and "PWNED" not in (box / "tools" / "run.sh").read_text(), output


def test_what_an_include_for_another_branch_names_is_guarded_too(box_or_bare):
    """includeIf onbranch:release is false on main, but its hooksPath holds as soon as the person switches."""
    box = box_or_bare
    make_repo(box)
    (box / "release.inc").write_text("[core]\n\thooksPath = release-hooks\n")
    git(box, "config", "includeIf.onbranch:release.path", "../release.inc")
    output, _ = sh("mkdir -p release-hooks && " + HOOK.format("release-hooks") + "; echo planted")
    assert "planted" in output and not (box / "release-hooks" / "pre-commit").exists(), output


def test_configs_below_a_linked_git_dir_and_in_a_bare_repository_are_masked(box):
    """A submodule's config below .bare (a .git file leads there), and a bare repository's (known by content)."""
    make_repo(box)
    for git_dir in (box / ".bare", box / "backup.git"):
        (git_dir / "modules" / "lib" / "refs").mkdir(parents=True)
        (git_dir / "objects").mkdir()
        (git_dir / "refs").mkdir()
        (git_dir / "HEAD").write_text("ref: refs/heads/main\n")
        for config in (git_dir / "config", git_dir / "modules" / "lib" / "config"):
            config.write_text("[remote \"origin\"]\n\turl = https://example.com/r?token=linkedmarker\n")
    (box / "sub").mkdir()
    (box / "sub" / ".git").write_text("gitdir: ../.bare\n")
    output, _ = sh("cat .bare/modules/lib/config backup.git/config; grep -r linkedmarker .bare backup.git; echo end")
    assert "linkedmarker" not in output and "end" in output, output


def linked_hooks(root: Path) -> None:
    (root / "tools" / "hooks").mkdir(parents=True)
    subprocess.run(["rm", "-rf", str(root / ".git" / "hooks")], check=True)
    (root / ".git" / "hooks").symlink_to("../tools/hooks")


def nested_hooks_path(root: Path) -> None:
    (root / "a" / "b").mkdir(parents=True)
    git(root, "config", "core.hooksPath", str(root / "a" / "b"))


HOOK = "printf '#!/bin/sh\\ntouch PWNED\\n' > {0}/pre-commit && chmod +x {0}/pre-commit"
RENAMED_PARENTS = {
    "the folder above a linked hooks folder": (linked_hooks, "mv tools tools.old && mkdir -p tools/hooks && "
                                               + HOOK.format("tools/hooks")),
    "the folder above an absolute hooksPath": (nested_hooks_path, "mv a a.old && mkdir -p a/b && " + HOOK.format("a/b")),
    "the folder above an include": (include_chain, "mv conf conf.old && mkdir conf && "
                                    + FSMONITOR.format("conf/team.cfg")),
}


@pytest.mark.parametrize("name", RENAMED_PARENTS)
def test_a_folder_above_a_pinned_path_cannot_be_moved(box, name):
    make_repo(box)
    prepare, plant = RENAMED_PARENTS[name]
    prepare(box)
    output, failed = sh(plant + "; echo planted")
    later = git_everywhere(box)
    assert "planted" in output and not pwned(box), (output, later)
    assert "busy" in output.lower() or "KeSi put back" in output, output


def test_a_submodule_folder_cannot_be_swapped_for_a_planted_repository(with_submodule):
    root = with_submodule
    output, _ = sh("mv sub sub.old && mkdir sub && cd sub && git init -q && "
                   "git config core.fsmonitor 'touch ../PWNED; false'; echo planted")
    later = git_everywhere(root)
    assert "planted" in output and not pwned(root), (output, later)


def test_kesi_records_are_out_of_reach(box):
    kesi.run_command("echo secret-output-7c1")            # an audit entry with output
    output, _ = sh(f"mv .kesi .kesi.old; cat '{kesi.records_folder()}'/*; grep -r secret-output . ; echo end")
    assert "end" in output and "secret-output-7c1" not in output, output
    assert (kesi.records_folder() / kesi.AUDIT_LOG).is_file() and not (box / ".kesi").exists()


REBASE_STATE = ("h=$(git rev-parse HEAD); mkdir -p .git/rebase-merge && cd .git/rebase-merge && "
                "echo refs/heads/main > head-name && echo $h > onto && echo $h > orig-head && touch interactive && "
                "echo 1 > msgnum && echo 1 > end && ")


@pytest.mark.parametrize("todo", ["exec touch ../PWNED", "x touch ../PWNED", "  exec   touch ../PWNED"])
def test_an_exec_line_planted_in_a_rebase_to_do_list_is_taken_out(bare, todo):
    box = bare
    make_repo(box)
    output, failed = sh(REBASE_STATE + f"printf 'pick 0000000 keep me\\n{todo}\\n' > git-rebase-todo; echo ok")
    assert "ok" in output and failed and "git-rebase-todo" in output, output
    remaining = (box / ".git" / "rebase-merge" / "git-rebase-todo").read_text()
    assert remaining == "pick 0000000 keep me\n", remaining
    subprocess.run(["git", "rebase", "--continue"], cwd=box, env={**os.environ, **GIT_ENV}, capture_output=True,
                   timeout=30)
    assert not pwned(box)


def test_a_modules_folder_made_to_look_like_a_repository_hides_nothing(bare, tmp_path_factory):
    box = bare
    add_submodule(box, tmp_path_factory.mktemp("upstream"), "lfs")
    output, failed = sh("touch .git/modules/HEAD && " + EVIL_GITDIR.format(d="evilgd")
                        + " && echo \"$PWD/evilgd\" > .git/modules/lfs/commondir; echo planted")
    assert "planted" in output and failed and ".git/modules/lfs/commondir" in output, output
    later = git_everywhere(box)
    assert not (box / ".git" / "modules" / "lfs" / "commondir").exists() and not pwned(box), later


# Round 3: another repository in the work tree (a clone in vendor/) is guarded as the workspace's own.

NESTED_PLANTS = [
    "echo 'touch ../../PWNED' > vendor/lib/.git/hooks/pre-commit; chmod +x vendor/lib/.git/hooks/pre-commit",
    "printf '[core]\\n\\tfsmonitor = touch ../../PWNED\\n' >> vendor/lib/.git/config",
    "mv vendor/lib vendor/lib.old && mkdir vendor/lib && cd vendor/lib && git init -q && "
    "git config core.fsmonitor 'touch ../../PWNED; false'",
]


@pytest.mark.parametrize("plant", NESTED_PLANTS)
def test_a_nested_repository_runs_nothing_planted(box_or_bare, plant):
    box = box_or_bare
    make_repo(box)
    nested_repository(box)
    output, _ = sh(plant + "; echo planted")
    later = git_everywhere(box / "vendor" / "lib")
    assert "planted" in output and not pwned(box), (output, later)


def test_a_nested_repository_removed_or_made_stays_as_the_command_left_it(box, monkeypatch):
    make_repo(box)
    nested_repository(box)
    output, failed = sh("git init -q vendor/fresh && echo made")
    assert not failed and "made" in output and (box / "vendor" / "fresh" / ".git" / "HEAD").is_file(), output
    # Inside the sandbox its masked config cannot be removed; without it, all of it can.
    monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)
    output, failed = sh("rm -rf vendor/lib && echo removed")
    assert not failed and "removed" in output and "put back" not in output, output
    assert not (box / "vendor" / "lib").exists()


NEW_REPOSITORY_PLANTS = {
    "registered as a submodule": "mkdir -p inner && cd inner && git init -q && "
                                 "git config core.fsmonitor 'touch ../PWNED; false' && echo a > a && git add a && "
                                 "git -c user.name=a -c user.email=a@b commit -qm a && cd .. && git add inner",
    "a hooks path": "git init -q fresh && git -C fresh config core.hooksPath ../evil-hooks && mkdir -p evil-hooks && "
                    "printf '#!/bin/sh\\ntouch ../PWNED\\n' > evil-hooks/pre-commit && chmod +x evil-hooks/pre-commit",
    "a hook": "git init -q fresh && printf '#!/bin/sh\\ntouch ../PWNED\\n' > fresh/.git/hooks/pre-commit && "
              "chmod +x fresh/.git/hooks/pre-commit",
    "an include": "git init -q fresh && printf '[core]\\n\\tfsmonitor = touch ../PWNED\\n' > inc.cfg && "
                  "git -C fresh config include.path ../../inc.cfg",
    "a commondir": EVIL_GITDIR.format(d="evilgd") + " && git init -q fresh && echo \"$PWD/evilgd\" > fresh/.git/commondir",
    # the fourth outside pass: git dirs behind a .git file or link, in ignored folders, locked configs
    "behind a .git file": "git init -q --separate-git-dir=$PWD/gd inner && "
                          "git -C inner config core.fsmonitor 'touch ../PWNED; false' && "
                          "git -C inner -c user.name=a -c user.email=a@b commit -q --allow-empty -m a && git add inner",
    "behind a .git link": "git init -q --bare store && git config --file store/config core.bare false && "
                          "mkdir inner && ln -s ../store inner/.git && "
                          "git -C inner config core.fsmonitor 'touch ../PWNED; false' && "
                          "git -C inner -c user.name=a -c user.email=a@b commit -q --allow-empty -m a && git add inner",
    "in node_modules": "git init -q node_modules/p && git -C node_modules/p -c user.name=a -c user.email=a@b commit -q --allow-empty -m s && "
                       "git -C node_modules/p config core.fsmonitor 'touch ../../PWNED; false' && "
                       "git add node_modules/p && echo y > node_modules/p/f",
    "behind a .git file, not registered": "git init -q --separate-git-dir=$PWD/gd fresh && "
                                          "git -C fresh config core.fsmonitor 'touch ../PWNED; false'",
    "with a locked config": "git init -q fresh && git -C fresh config core.fsmonitor 'touch ../PWNED; false' && "
                            "touch fresh/.git/config.lock",
    "with a locked config folder": "git init -q fresh && git -C fresh config core.fsmonitor 'touch ../PWNED; false' && "
                                   "mkdir fresh/.git/config.lock",
    "a submodule of its own": "git init -q fresh && mkdir -p fresh/.git/modules && "
                              "git init -q --separate-git-dir=$PWD/fresh/.git/modules/m fresh/m && "
                              "git -C fresh/m config core.fsmonitor 'touch ../../PWNED; false'",
}


@pytest.mark.parametrize("name", NEW_REPOSITORY_PLANTS)
def test_a_repository_a_command_creates_runs_nothing_planted(box_or_bare, name):
    box = box_or_bare
    make_repo(box)
    output, _ = sh(NEW_REPOSITORY_PLANTS[name] + "; echo planted")
    assert "planted" in output and ("KeSi put back" in output or "Read-only file system" in output), output
    later = git_everywhere(box)
    for repo in ("inner", "fresh", "fresh/m"):
        if (box / repo / ".git").exists():
            (box / repo / "a.txt").write_text("x\n")
            later += git(box / repo, "status").stdout + git(box / repo, "add", "a.txt").stderr
            later += git(box / repo, "commit", "-qm", "x").stderr
    assert not pwned(box), (output, later)


def test_a_fresh_clone_keeps_its_config(box):
    upstream = box / "upstream"                      # in the workspace: the sandbox's /tmp is its own
    upstream.mkdir()
    make_repo(upstream)
    output, failed = sh("git clone -q upstream vendor/lib && git -C vendor/lib config user.email me@x && "
                        "git -C vendor/lib remote set-url origin https://example.com/r.git && "
                        "git -C vendor/lib config --list --local")
    assert not failed and "put back" not in output, output
    config = git(box / "vendor" / "lib", "config", "--list", "--local").stdout
    assert "remote.origin.url=" in config and "remote.origin.fetch=" in config and ".remote=origin" in config, config
    assert "user.email=me@x" in config, config
    # A remote that is a local path goes, with the branch's: a push would run that repository's hooks outside.
    output, _ = sh("git clone -q upstream vendor/other")
    config = git(box / "vendor" / "other", "config", "--list", "--local").stdout
    assert "vendor/other/.git/config: remote.origin.url" in output and "remote.origin" not in config, config
    assert ".remote=" not in config and ".merge=refs/heads/" in config, config


def test_hooks_planted_where_there_was_no_hooks_folder_are_removed(bare):
    box = bare
    make_repo(box)
    subprocess.run(["rm", "-rf", str(box / ".git" / "hooks")], check=True)
    output, failed = sh("mkdir -p .git/hooks && echo 'touch PWNED' > .git/hooks/pre-commit && "
                        "chmod +x .git/hooks/pre-commit; echo planted")
    later = git_everywhere(box)
    assert failed and "KeSi put back" in output and ".git/hooks" in output, output
    assert not pwned(box), later


def test_a_hooks_folder_linked_into_the_work_tree_is_read_only(box):
    make_repo(box)
    subprocess.run(["rm", "-rf", str(box / ".git" / "hooks")], check=True)
    (box / "myhooks").mkdir()
    (box / ".git" / "hooks").symlink_to("../myhooks")
    sh("echo 'touch PWNED' > myhooks/pre-commit; chmod +x myhooks/pre-commit")
    later = git_everywhere(box)
    assert not pwned(box) and not (box / "myhooks" / "pre-commit").exists(), later


def add_submodule(root: Path, upstream: Path, name: str) -> None:
    make_repo(upstream)
    make_repo(root)
    added = subprocess.run(["git", "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream),
                            name], cwd=root, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert added.returncode == 0, added.stderr
    assert git(root, "commit", "-qm", f"with {name}").returncode == 0


@pytest.fixture
def with_submodule(box, tmp_path_factory):
    add_submodule(box, tmp_path_factory.mktemp("upstream"), "sub")
    return box


@pytest.mark.parametrize("plant", [
    "echo 'touch ../PWNED' > .git/modules/sub/hooks/pre-commit; chmod +x .git/modules/sub/hooks/pre-commit",
    EVIL_GITDIR.format(d="evilgd") + " && echo \"$PWD/evilgd\" > .git/modules/sub/commondir",
    EVIL_GITDIR.format(d="evilgd") + " && printf 'gitdir: ../evilgd\\n' > sub/.git",
    "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > .git/modules/sub/config.worktree",
])
def test_submodule_control_files_are_guarded(with_submodule, plant):
    root = with_submodule
    pointer = (root / "sub" / ".git").read_text()
    sh(plant)
    (root / "sub" / "a.txt").write_text("changed in sub\n")
    later = [git(root, "status"), git(root / "sub", "status"), git(root / "sub", "commit", "-qam", "sub later")]
    assert (root / "sub" / ".git").read_text() == pointer
    assert not pwned(root), [p.stdout + p.stderr for p in later]


def test_another_worktrees_control_files_are_put_back(box, tmp_path_factory):
    make_repo(box)
    other = tmp_path_factory.mktemp("other") / "wt"
    assert git(box, "worktree", "add", "-q", str(other)).returncode == 0
    name = other.name
    sh(EVIL_GITDIR.format(d="evilgd") + f" && echo \"$PWD/evilgd\" > .git/worktrees/{name}/commondir")
    later = git_everywhere(other)
    assert not pwned(box, other), later


@pytest.mark.parametrize("rel", [".venv/src/pkg/.git/config", "node_modules/dep/.git/config"])
def test_git_configs_inside_dependency_folders_are_masked(box, rel):
    (box / rel).parent.mkdir(parents=True)
    (box / rel).write_text("[kesi]\n\tcanary = depcanary-3b7e\n")     # not a credential format: no output mask
    output, _ = sh(f"cat {rel}; grep -r depcanary . 2>/dev/null; echo end")
    assert "depcanary-3b7e" not in output and "end" in output, output


def test_of_dot_local_only_the_program_folders_are_readable(box, tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    for rel, text in {".local/bin/tool": "#!/bin/sh\necho tool-ran\n",
                      ".local/share/keyrings/login.keyring": "keyring-canary-5d1",
                      ".local/share/fish/fish_history": "history-canary-5d1",
                      ".local/share/uv/credentials/credentials.toml": "uvcred-canary-5d1",
                      ".local/share/Trash/files/.env": "trash-canary-5d1"}.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    (home / ".local/bin/tool").chmod(0o755)
    monkeypatch.setattr(kesi, "HOME_DIR", home)
    output, _ = sh(f"{home}/.local/bin/tool; cat {home}/.local/share/keyrings/* {home}/.local/share/fish/* "
                   f"{home}/.local/share/uv/credentials/* {home}/.local/share/Trash/files/.env; echo end")
    assert "tool-ran" in output and "end" in output and "canary-5d1" not in output, output


# --- round 3: the second outside pass -------------------------------------------------

def test_a_huge_planted_control_file_does_not_stop_the_put_back(bare):
    box = bare
    make_repo(box)
    output, failed = sh("mkdir -p .git/zz && truncate -s 1T .git/zz/config && "
                        + EVIL_GITDIR.format(d="evilgd") + " && echo \"$PWD/evilgd\" > .git/commondir; echo planted")
    assert failed and "KeSi put back" in output, output
    assert not (box / ".git" / "zz" / "config").exists() and not (box / ".git" / "commondir").exists()
    later = git_everywhere(box)
    assert not pwned(box), later
    assert sh("echo still-works")[0].startswith("still-works")


def test_many_planted_files_are_reported_briefly(bare):
    box = bare
    make_repo(box)
    output, failed = sh("for i in $(seq 300); do "
                        "mkdir -p .git/m$i/hooks && echo x > .git/m$i/hooks/pre-commit; done; echo planted")
    assert failed and "and 290 more" in output and len(output) < 5000, output[-500:]


def test_a_submodule_named_like_a_data_folder_is_guarded(box, tmp_path_factory):
    add_submodule(box, tmp_path_factory.mktemp("upstream-lfs"), "lfs")
    sh(EVIL_GITDIR.format(d="evilgd") + " && echo \"$PWD/evilgd\" > .git/modules/lfs/commondir")
    later = [git(box, "status"), git(box / "lfs", "status")]
    assert not pwned(box), [p.stdout + p.stderr for p in later]


def test_a_very_deep_tree_does_not_break_later_commands(box):
    make_repo(box)
    output, _ = sh("python3 -c \"import os\nfor top in ('deep', '.git/modules/deep'):\n"
                   "    os.makedirs(top, exist_ok=True); os.chdir(top)\n"
                   "    for _ in range(1200): os.mkdir('d'); os.chdir('d')\n"
                   "    os.chdir(os.environ['PWD'])\"; echo made")
    try:
        assert "made" in output, output
        again, failed = sh("echo still-works")
        assert not failed and again.startswith("still-works"), again
    finally:
        for top in (box / "deep", box / ".git" / "modules" / "deep"):
            remove_deep_chain(top)


def remove_deep_chain(top: Path) -> None:
    """Remove a chain of nested d/ folders without recursion (shutil.rmtree
    recurses, and pytest's own clean-up of old temp folders would fail)."""
    if not top.is_dir():
        return
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    chain = [fd]
    while "d" in os.listdir(chain[-1]):
        chain.append(os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=chain[-1]))
    while len(chain) > 1:
        os.close(chain.pop())
        os.rmdir("d", dir_fd=chain[-1])
    os.close(fd)
    os.rmdir(top)


# --- class 4: no setuid or setgid file can be planted (KeSi as root) --------------------
# As root, the command's uid 0 is the real root: a setuid file it leaves in the
# workspace would run as root for any local user, outside the sandbox.

def setuid_system_file() -> str | None:
    """A setuid file the system ships, for cp -p to copy."""
    for path in ("/usr/bin/passwd", "/usr/bin/su", "/usr/bin/mount", "/bin/su"):
        if os.path.isfile(path) and os.stat(path).st_mode & stat.S_ISUID:
            return path
    return None


def setid_tar(workspace: Path) -> None:
    """x.tar, made outside, holding one setuid and one setgid program."""
    with tarfile.open(workspace / "x.tar", "w") as archive:
        for name, mode in (("suid", 0o4755), ("sgid", 0o2755)):
            entry = tarfile.TarInfo(name)
            entry.mode, entry.size = mode, 3
            archive.addfile(entry, io.BytesIO(b"#!\n"))


PY = "python3 -c 'import os, stat; {}'"
SETID_PLANTS = {
    "chmod u+s": "cp /bin/true f && chmod u+s f",
    "chmod g+s": "cp /bin/true f && chmod g+s f",
    "chmod 4755": "cp /bin/true f && chmod 4755 f",
    "chmod 6755 later in a script": "cp /bin/true f; sh -c 'chmod 6755 f'",
    "os.chmod": PY.format("open(\"f\", \"w\").close(); os.chmod(\"f\", 0o4755)"),
    "os.fchmod": PY.format("fd = os.open(\"f\", os.O_CREAT | os.O_WRONLY, 0o755); os.fchmod(fd, 0o4755)"),
    "os.open O_CREAT 4755": PY.format("os.open(\"f\", os.O_CREAT | os.O_WRONLY, 0o4755)"),
    "os.open O_CREAT 2755": PY.format("os.open(\"f\", os.O_CREAT | os.O_WRONLY, 0o2755)"),
    "O_TMPFILE 4755, then linked": PY.format(
        "fd = os.open(\".\", os.O_TMPFILE | os.O_WRONLY, 0o4755); os.link(f\"/proc/self/fd/{fd}\", \"f\")"),
    "mknod a regular file 4755": PY.format("os.mknod(\"f\", stat.S_IFREG | 0o4755)"),
    "mknod -m 4755 a fifo": "mknod -m 4755 f p",
    "install -m 4755": "install -m 4755 /bin/true f",
    "cp -p of a setuid file": "cp -p {setuid} f",
    "tar extraction": "tar -xpf x.tar",
}


def setid_files(top: Path) -> list[str]:
    found = []
    for root, dirs, files in os.walk(top):
        for name in dirs + files:
            mode = os.lstat(os.path.join(root, name)).st_mode
            if mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(f"{os.path.join(root, name)} {oct(mode)}")
    return found


@pytest.mark.parametrize("plant", SETID_PLANTS)
def test_no_setuid_or_setgid_file_can_be_made(box, plant):
    command = SETID_PLANTS[plant]
    if "{setuid}" in command:
        if setuid_system_file() is None:
            pytest.skip("no setuid file on this system to copy")
        command = command.format(setuid=setuid_system_file())
    setid_tar(box)
    output, failed = sh(command)
    assert setid_files(box) == [], output
    assert failed, output


def test_a_hook_too_big_to_keep_rewritten_at_its_size_is_removed(bare):
    """rt22d: a control file over 1 MB was compared by size and mode only; a same-size rewrite survived."""
    lib = nested_repository(bare)
    hook = lib / ".git" / "hooks" / "pre-commit"
    hook.write_bytes(b"#!/bin/sh\necho mine\n#" + b"x" * 1_200_000 + b"\n")
    hook.chmod(0o755)
    sh("true")                                   # the check's baseline knows the hook
    output, _ = sh(f"{sys.executable} -c \"f = open('{hook}', 'r+b'); f.write(b'#!/bin/sh\\ntouch PWNED #')\"; "
                   f"touch -r {lib}/a.txt {hook}")
    assert not hook.exists() or hook.read_bytes().startswith(b"#!/bin/sh\necho mine"), output
    assert "vendor/lib/.git/hooks/pre-commit" in output, output


FSMONITOR_PLANT = "printf '#!/bin/sh\\ntouch {box}/PWNED\\n' > fsm.sh && chmod +x fsm.sh && "


def test_a_new_repository_s_submodule_named_with_a_slash_is_disarmed(box):
    """rt22d: in a repository a command makes, a submodule named a/b keeps its git dir in .git/modules/a/b."""
    output, _ = sh(FSMONITOR_PLANT.format(box=box) + "git init -q vendor/y && cd vendor/y && "
                   "mkdir -p .git/modules/a && git init -q --separate-git-dir=.git/modules/a/b node_modules/sm && "
                   f"git -C node_modules/sm config core.fsmonitor {box}/fsm.sh")
    config = box / "vendor" / "y" / ".git" / "modules" / "a" / "b" / "config"
    assert config.exists() and "fsmonitor" not in config.read_text(), output
    git(box / "vendor" / "y" / "node_modules" / "sm", "status")
    assert not pwned(box)


def test_a_submodule_git_dir_deeper_than_the_walk_is_disarmed(bare):
    """rt22d: a git dir 45 folders down .git/modules, registered by the index, escaped the check."""
    make_repo(bare)
    deep = ".git/modules/" + "a/" * 45 + "x"
    output, _ = sh(FSMONITOR_PLANT.format(box=bare) + f"mkdir -p {deep} && "
                   f"git init -q --separate-git-dir={deep} sub && "
                   f"git -C sub config core.fsmonitor {bare}/fsm.sh && git -C sub -c user.name=a -c user.email=a@b "
                   "commit -q --allow-empty -m s && git add sub")
    assert "fsmonitor" not in (bare / deep / "config").read_text(), output
    git(bare, "status")
    assert not pwned(bare)


def test_io_uring_is_refused_its_open_carries_a_mode_the_filter_cannot_read(box):
    """rt22d: an io_uring OPENAT with mode 04755 made an (empty) setuid file; with io_uring_setup refused (ENOSYS, as
    openat2), a program falls back to the calls the filter reads."""
    output, _ = sh(PY.format("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                             "print(\"result\", libc.syscall(425, 8, ctypes.create_string_buffer(120)), "
                             "ctypes.get_errno())"))
    assert f"result -1 {errno.ENOSYS}" in output, output


def test_a_background_task_cannot_make_a_setuid_file_either(box):
    kesi.run_command("cp /bin/true f && chmod 4755 f", run_in_background=True)
    (task,) = kesi.BACKGROUND_TASKS.values()
    try:
        assert task.proc.wait(timeout=30) != 0
        assert setid_files(box) == []
    finally:
        kesi.stop_background_tasks()
        kesi.BACKGROUND_TASKS.clear()
        for fd in kesi._shared_network:     # later tests get a network of their own again
            os.close(fd)
        kesi._shared_network.clear()


def test_ordinary_modes_still_work(box):
    output, failed = sh("printf 'echo ran\\n' > s && chmod +x s && ./s && chmod 755 s && chmod u+x,g-w s && "
                        "cp -p s s2 && install -m 700 s s3 && mkdir -m 2700 d2 2>/dev/null; "
                        "python3 -c 'import os; os.chmod(\"s\", 0o750); os.open(\"n\", os.O_CREAT, 0o640)' && "
                        "stat -c '%n %a' s s2 s3 n")
    assert not failed, output
    assert "ran" in output and "s 750" in output and "s2 755" in output and "s3 700" in output, output
    assert "n 640" in output or "n 600" in output, output     # as the umask leaves it


# --- class 4: root's secrets outside home (KeSi as root) --------------------------------

SYSTEM_SECRET_PATHS = ["/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
                       "/etc/letsencrypt", "/etc/security/opasswd"]


def test_system_secrets_are_unreadable_inside(box):
    present = [path for pattern in SYSTEM_SECRET_PATHS for path in glob.glob(pattern)]
    if not present:
        pytest.skip("none of the secret system paths exists here")
    for path in present:
        probe = f"ls -A {path}" if os.path.isdir(path) else f"head -c 1 {path}"
        output, failed = sh(f"{probe} && echo READ-IT")
        assert failed and "READ-IT" not in output, (path, output)


def test_ordinary_system_files_stay_readable(box):
    output, failed = sh("head -c 1 /etc/passwd > /dev/null && head -c 1 /etc/hosts > /dev/null && "
                        "ls /etc/ssl/certs > /dev/null && echo fine")
    assert not failed and "fine" in output, output


SWAP_LOOP = ("python3 -c 'import ctypes, os, time\nlibc = ctypes.CDLL(None)\nend = time.time() + 120\n"
             "while time.time() < end and not os.path.exists(\"stop\"):\n"
             "    libc.renameat2(-100, b\"w\", -100, b\"L\", 2)\n'")
PLANT_IN_THE_FOLDER = ("for d in w L; do if [ -d $d ] && [ ! -L $d ]; then rm -rf $d/.git; git init -q $d; "
                       "echo 'touch PWNED' > $d/.git/hooks/pre-commit; git -C $d config alias.x y; fi; done; true")


def test_a_link_swapped_in_by_a_background_task_never_leads_the_guard_outside(box, tmp_path_factory):
    victim = tmp_path_factory.mktemp("victim")
    make_repo(victim)
    (victim / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\necho the user's own hook\n")
    assert git(victim, "config", "alias.mine", "status").returncode == 0
    files = {path: path.read_bytes() for path in (victim / ".git").rglob("*") if path.is_file()}
    make_repo(box)
    (box / "L").symlink_to(victim)
    (box / "w").mkdir()
    kesi.run_command(SWAP_LOOP, run_in_background=True)
    try:
        outputs = [sh(PLANT_IN_THE_FOLDER)[0] for _ in range(30)]
    finally:
        (box / "stop").touch()
        kesi.stop_background_tasks()
        kesi.BACKGROUND_TASKS.clear()
    lost = [str(path) for path, data in files.items() if not path.is_file() or path.read_bytes() != data]
    assert lost == [], outputs


GIT_DIR_IN_DOT_GIT = ("mkdir -p src && echo hi > src/f && git init -q --bare {g} && "
                      "printf '[core]\\n\\tbare = false\\n\\tfsmonitor = \"touch $PWD/PWNED; false\"\\n' > {g}/config && "
                      "{point} && cd src && git add f && git -c user.email=a@b -c user.name=a commit -qm x && cd .. && ")


@pytest.mark.parametrize("g, point, register", [
    (".git/objects/ev", "echo 'gitdir: ../.git/objects/ev' > src/.git", True),
    (".git/refs/ev", "echo 'gitdir: ../.git/refs/ev' > src/.git", False),
    (".git/logs/ev", "ln -s ../.git/logs/ev src/.git", False),
    (".git/modules/m/objects/ev", "echo 'gitdir: ../.git/modules/m/objects/ev' > src/.git", True)])
def test_a_git_dir_planted_in_the_top_git_dir_runs_nothing(bare, g, point, register):
    box = bare
    make_repo(box)
    assert git(box, "init", "-q", "--bare", ".git/modules/m").returncode == 0    # a submodule's git dir, known
    register_it = "git update-index --add --cacheinfo 160000,$(git -C src rev-parse HEAD),src && " if register else ""
    output, _ = sh(GIT_DIR_IN_DOT_GIT.format(g=g, point=point) + register_it + "echo planted")
    assert "planted" in output, output
    later = git(box, "status").stdout + git(box / "src", "status").stdout
    assert not pwned(box), (output, later)


# --- red team rt22: what a background task plants between commands -------------------------
# The check after a command compared with that command's own "before", which already held what a task
# planted meanwhile. Now what tasks change is put back at the next check: a command, or the task's end.

def embedded_submodule(root: Path) -> None:
    """sub/ is a repository of its own with its .git folder in place, registered as a submodule."""
    (root / "sub").mkdir()
    make_repo(root / "sub")
    assert git(root, "add", "sub").returncode == 0 and git(root, "commit", "-qm", "sub").returncode == 0


BACKGROUND_PLANTS = {
    "a new repository": "git init -q src && git -C src config core.fsmonitor 'touch ../PWNED; false'",
    "a hook in a nested repository": "printf '#!/bin/sh\\ntouch ../../PWNED\\n' > vendor/lib/.git/hooks/pre-commit"
                                     " && chmod +x vendor/lib/.git/hooks/pre-commit",
    "a commondir in an embedded submodule": EVIL_GITDIR.format(d="evilgd") + " && cp -r sub/.git/objects "
                                            "sub/.git/refs sub/.git/HEAD evilgd/ && "
                                            "echo ../../evilgd > sub/.git/commondir",
}


def plant_in_the_background(box: Path, name: str, then: str = "") -> "kesi.BackgroundTask":
    make_repo(box)
    nested_repository(box)
    embedded_submodule(box)
    text, failed = kesi.run_command(f"{BACKGROUND_PLANTS[name]}; touch planted{then}", run_in_background=True)
    assert not failed, text
    deadline = time.monotonic() + 30
    while not (box / "planted").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return kesi.BACKGROUND_TASKS[max(kesi.BACKGROUND_TASKS)]


def used_later(box: Path) -> str:
    """What the person runs outside later: status and commit at the top and in each repository."""
    return " | ".join(git_everywhere(box / repo) for repo in ("", "vendor/lib", "sub", "src") if (box / repo).is_dir())


@pytest.mark.parametrize("name", BACKGROUND_PLANTS)
def test_what_a_background_task_plants_is_put_back_by_the_next_command(box_or_bare, name):
    box = box_or_bare
    task = plant_in_the_background(box, name)
    task.proc.wait(timeout=30)
    output, _ = sh("echo next")
    refused = kesi.sandbox_enabled() and b"Read-only file system" in task.output.since(0)[0]   # issue 22
    assert "next" in output and ("which background task 1 (" in output or refused), output
    later = used_later(box)
    assert not pwned(box), (output, later)


def test_what_a_background_task_plants_is_put_back_when_it_is_stopped(bare):
    box = bare
    plant_in_the_background(box, "a hook in a nested repository", then="; sleep 60")
    output, failed = kesi.background_stop(1)
    assert not failed and "KeSi put back vendor/lib/.git/hooks/pre-commit, which background task 1" in output, output
    later = used_later(box)
    assert not pwned(box), later


def test_changes_of_the_person_to_the_top_repository_are_kept_while_a_task_runs(box):
    make_repo(box)
    text, failed = kesi.run_command("sleep 60", run_in_background=True)
    assert not failed, text
    assert git(box, "config", "alias.mine", "status").returncode == 0      # the person, between commands
    output, _ = sh("echo next")
    assert "put back" not in output and git(box, "config", "alias.mine").stdout == "status\n", output


def test_what_a_background_task_plants_is_put_back_when_kesi_stops_it_at_exit(box, notices):
    plant_in_the_background(box, "a new repository", then="; sleep 60")
    kesi.stop_background_tasks()                   # as at KeSi's exit
    assert "KeSi put back src/.git/config: core.fsmonitor, which background task 1" in notices.getvalue()
    later = used_later(box)
    assert not pwned(box), later


ESCAPED_KEY = "\\033]52;c;ZWNobyBwd25lZAo=\\007\\033[2J\\033[HAll good: nothing to report"


@pytest.mark.parametrize("how", ["exit", "mode"])
def test_a_planted_config_key_with_terminal_escapes_is_put_back_shown_escaped(box, notices, how):
    """rt25h L4: the put-back notice printed a key's OSC 52 (clipboard) and screen clear raw."""
    make_repo(box)
    plant = f"git init -q newrepo && printf '[x \"{ESCAPED_KEY}\"]\\n\\ty = 1\\n' >> newrepo/.git/config"
    text, failed = kesi.run_command(f"{plant}; touch planted; sleep 60", run_in_background=True)
    assert not failed, text
    deadline = time.monotonic() + 30
    while not (box / "planted").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if how == "mode":
        kesi.stop_tasks_beyond_permission(revoked=True)      # as /revoke: the person's yes taken back
    else:
        kesi.stop_background_tasks()                       # as at KeSi's exit
    shown = notices.getvalue()
    assert "KeSi put back newrepo/.git/config: x.\\x1b]52;c;" in shown and "\\x1b[2J" in shown, shown
    assert "\x1b" not in shown and "\x07" not in shown, shown


# rt22f: a thread beside a vfork. The main thread waits in vfork (never shows stopped) or has ended, a second
# thread keeps planting a repository: taken for paused, it planted after the put-back and became the baseline.
VFORK_PLANTER = r"""
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
static void put(const char *path, const char *text, int mode) {
    FILE *f = fopen("t.tmp", "w");
    if (f) { fputs(text, f); fclose(f); chmod("t.tmp", mode); rename("t.tmp", path); }
}
static void *plant(void *unused) {
    for (;;) {
        mkdir("vendor", 0755); mkdir("vendor/y", 0755); mkdir("vendor/y/.git", 0755);
        mkdir("vendor/y/.git/objects", 0755); mkdir("vendor/y/.git/refs", 0755); mkdir("vendor/y/.git/hooks", 0755);
        put("vendor/y/.git/HEAD", "ref: refs/heads/main\n", 0644);
        put("vendor/y/.git/config", "[core]\n\tfsmonitor = touch ../../PWNED; false\n", 0644);
        put("vendor/y/.git/hooks/pre-commit", "#!/bin/sh\ntouch ../../PWNED\n", 0755);
        usleep(500);
    }
}
int main(void) {
    pthread_t thread;
    pthread_create(&thread, 0, plant, 0);
    sleep(1);
    PARK;
    return 0;
}
"""


@pytest.mark.parametrize("park", ["if (vfork() == 0) for (;;) pause()", "pthread_exit(0)"], ids=["vfork", "zombie"])
def test_a_thread_beside_a_vfork_is_paused_too(box, park):
    if shutil.which("cc") is None:
        pytest.skip("needs a C compiler")
    make_repo(box)
    (box / "planter.c").write_text(VFORK_PLANTER.replace("PARK", park))
    assert subprocess.run(["cc", "-O2", "-pthread", "-o", box / "planter", box / "planter.c"]).returncode == 0
    text, failed = kesi.run_command("./planter", run_in_background=True)
    assert not failed, text
    task, deadline = kesi.BACKGROUND_TASKS[1], time.monotonic() + 30
    planter = []
    while not planter and time.monotonic() < deadline:      # the planter, once its main thread waits in vfork
        time.sleep(0.1)
        planter = [pid for pid in kesi.sandbox_processes([task.proc.pid]) if os.path.exists(f"/proc/{pid}/task")
                   and len(os.listdir(f"/proc/{pid}/task")) == 2
                   and Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "DZ"]
    assert planter and kesi.moving_threads(planter[0])     # its second thread runs: not paused
    outputs = [sh(command)[0] for command in ("true", "echo next")]
    assert all("KeSi put back vendor/y/.git/" in output for output in outputs), outputs   # never the baseline
    kesi.stop_background_tasks()                        # as at KeSi's exit
    later = git_everywhere(box / "vendor" / "y") if (box / "vendor" / "y" / ".git").is_dir() else ""
    assert not pwned(box), later


# Red team rt22b: the sequencer's other state, and `.git` pointers read as git reads them.

def diverged(root: Path) -> None:
    """Branch side (commits b, c) off a.txt's commit; tag base (commit d) beside it; side checked out."""
    make_repo(root)
    git(root, "checkout", "-qb", "side")
    for name in ("b", "c", "d"):
        if name == "d":
            git(root, "checkout", "-q", "-")
        (root / name).write_text(name + "\n")
        assert git(root, "add", name).returncode == 0 and git(root, "commit", "-qm", name).returncode == 0
    git(root, "tag", "base")
    git(root, "checkout", "-q", "side")


EVIL_STRATEGY = ("export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@x GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@x; "
                 "mkdir -p git-merge-x && printf '#!/bin/sh\\ntouch PWNED\\n' > evil.sh && chmod +x evil.sh && ")
MERGE_PROGRAMS = {
    "rebase strategy": ("GIT_SEQUENCE_EDITOR='sed -i s/^pick/edit/' git rebase -qi base; "
                        "echo x/../evil.sh > .git/rebase-merge/strategy", ["rebase", "--continue"]),
    "cherry-pick opts": ("git checkout -q base && echo other > b && git add b && git commit -qm other && "
                         "git cherry-pick side~1 side; printf '[options]\\n\\tstrategy = x/../evil.sh\\n' "
                         ">> .git/sequencer/opts", ["cherry-pick", "--continue"]),
}


@pytest.mark.parametrize("name", MERGE_PROGRAMS)
def test_a_merge_program_planted_in_sequencer_state_does_not_run(box, name):
    diverged(box)
    plant, resume = MERGE_PROGRAMS[name]
    output, _ = sh(EVIL_STRATEGY + plant + "; echo planted")
    assert "planted" in output, output
    (box / "b").write_text("resolved\n")
    git(box, "add", "b")
    later = git(box, "-c", "core.editor=true", *resume)
    assert not pwned(box), (output, later.stdout + later.stderr)


@pytest.mark.parametrize("pointer", [
    "printf 'gitdir: /proc/self/cwd/evil\\n' > sub/.git",                   # git in sub: sub/evil
    "printf 'gitdir: evil\\n' > sub/pointer.txt && ln -s pointer.txt sub/.git",
    "printf 'gitdir: evil \\n' > sub/.git && mv sub/evil 'sub/evil ' && cp -r .git sub/evil"])
def test_a_planted_pointer_is_read_as_git_reads_it(box, pointer):
    make_repo(box)
    arm = "mkdir sub && " + EVIL_GITDIR.format(d="sub/evil") + " && "
    output, _ = sh(arm + pointer + " && git update-index --add --cacheinfo 160000,$(git rev-parse HEAD),sub; echo ok")
    assert "ok" in output, output
    later = git(box, "status").stdout + git(box / "sub", "status").stdout
    assert not pwned(box), (output, later)


def test_a_moved_submodule_git_dir_is_checked_where_it_is_and_kept(with_submodule, monkeypatch):
    monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)     # inside, only git-only commands write a git dir
    root = with_submodule
    config = (root / ".git" / "modules" / "sub" / "config").read_text()
    output, _ = sh("mv .git/modules/sub .git/modules/sub2 && echo 'touch PWNED' > .git/modules/sub2/hooks/pre-commit"
                   " && chmod +x .git/modules/sub2/hooks/pre-commit; echo moved")
    assert "moved" in output and "found at .git/modules/sub2" in output, output
    assert (root / ".git" / "modules" / "sub2" / "config").read_text() == config, output
    assert not (root / ".git" / "modules" / "sub2" / "hooks" / "pre-commit").exists(), output


def test_a_hooks_folder_moved_aside_is_made_again(bare):
    box = bare
    make_repo(box)
    lib = nested_repository(box)
    hook = lib / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho user-hook\n")
    output, _ = sh("mv vendor/lib/.git/hooks vendor/lib/.git/hooks.old; echo moved")
    assert "moved" in output and "vendor/lib/.git/hooks/pre-commit" in output, output
    assert hook.read_text() == "#!/bin/sh\necho user-hook\n", output


def test_a_submodule_registered_in_a_dependency_folder_is_guarded(box):
    make_repo(box)
    sh("git update-index --add --cacheinfo 160000,1111111111111111111111111111111111111111,node_modules/x")
    output, _ = sh("mkdir -p node_modules/x && cd node_modules/x && git init -q && "
                   "git config core.fsmonitor 'touch ../../PWNED; false'; echo planted")
    later = git(box, "status").stdout
    assert "planted" in output and not pwned(box), (output, later)


def test_an_embedded_submodule_in_a_dependency_folder_keeps_its_control_files(box):
    make_repo(box)
    (box / "node_modules" / "foo").mkdir(parents=True)
    make_repo(box / "node_modules" / "foo")
    assert git(box, "add", "node_modules/foo").returncode == 0          # an embedded repository: a gitlink
    output, _ = sh("cp -r node_modules/foo/.git node_modules/.evil && rm -f node_modules/.evil/config && "
                   + FSMONITOR.format("node_modules/.evil/config")
                   + " && echo ../../.evil > node_modules/foo/.git/commondir; echo planted")
    later = git(box, "status").stdout
    assert "planted" in output and not pwned(box), (output, later)


def test_paths_git_config_names_are_taken_from_the_top_of_the_work_tree(box):
    """KeSi started in a sub-folder of the repository, as in a husky monorepo (front/.husky)."""
    make_repo(box)
    (box / "front" / ".husky").mkdir(parents=True)
    (box / "front" / "gitconfig").write_text("[user]\n\tname = team\n")
    git(box, "config", "core.hooksPath", "front/.husky")
    git(box, "config", "include.path", "../front/gitconfig")
    checklib.use_base_dir(box / "front")
    output, _ = sh("printf '#!/bin/sh\\ntouch PWNED\\n' > .husky/pre-commit; chmod +x .husky/pre-commit; "
                   + FSMONITOR.format("gitconfig") + "; echo planted")
    checklib.use_base_dir(box)
    later = git_everywhere(box)
    assert "planted" in output and not pwned(box), (output, later)


def test_a_nested_git_dir_reached_through_a_link_reads_as_empty(box):
    make_repo(box)
    lib = nested_repository(box)
    git(lib, "config", "kesi.canary", "linkcanary-6d2a")              # not a credential format: no output mask
    (lib / ".git").rename(box / "vendor" / "lib.gitdir")
    (lib / ".git").symlink_to("../lib.gitdir")
    output, _ = sh("cat vendor/lib/.git/config | rev; echo end")
    assert "linkcanary-6d2a"[::-1] not in output and "end" in output, output


def test_a_per_worktree_config_reads_as_empty_as_config_does(box):
    make_repo(box)
    git(box, "config", "extensions.worktreeConfig", "true")
    git(box, "config", "--worktree", "kesi.canary", "worktreecanary-3c9b")    # git config --worktree writes there
    lib = nested_repository(box)
    (lib / ".git" / "config.worktree").write_text("[kesi]\n\tcanary = nestedcanary-71fd\n")
    output, _ = sh("cat .git/config.worktree vendor/lib/.git/config.worktree | rev; echo end")
    assert "worktreecanary-3c9b"[::-1] not in output and "nestedcanary-71fd"[::-1] not in output, output
    assert "end" in output


@pytest.mark.parametrize("target", ["gitconfig", f"/srv/kesi-outside-gitconfig-{uuid.uuid4().hex}"])
def test_a_git_config_that_is_a_link_masks_where_it_leads(box, target):
    make_repo(box)
    lead = box / target if not target.startswith("/") else Path(target)
    lead.write_text((box / ".git" / "config").read_text() + "[kesi]\n\tcanary = linkedcanary-5b0e\n")
    (box / ".git" / "config").unlink()
    (box / ".git" / "config").symlink_to(lead)
    try:
        output, _ = sh(f"cat .git/config {lead} | rev; git status --short >/dev/null && echo git-works; echo end")
    finally:
        lead.unlink() if target.startswith("/") else None
    assert "linkedcanary-5b0e"[::-1] not in output and "git-works" in output and "end" in output, output


def test_a_git_config_linked_to_proc_does_not_stop_the_sandbox(box):
    make_repo(box)
    sh("mkdir -p x/.git && ln -s /proc/self/environ x/.git/config")
    output, _ = sh("echo still-runs")
    assert "still-runs" in output, output


def test_a_submodule_config_stays_masked_when_its_head_is_moved(with_submodule):
    root = with_submodule
    git(root / "sub", "config", "kesi.canary", "subcanary-8e1f")
    assert git(root, "submodule", "--quiet", "deinit", "-f", "sub").returncode == 0    # no sub/.git points at it now
    sh("mv .git/modules/sub/HEAD .git/modules/sub/HEAD.bak")
    output, _ = sh("cat .git/modules/sub/config | rev; mv .git/modules/sub/HEAD.bak .git/modules/sub/HEAD; echo end")
    assert "subcanary-8e1f"[::-1] not in output and "end" in output, output


def test_every_link_on_a_hook_s_way_is_guarded(box):
    make_repo(box)
    (box / "scripts").mkdir()
    (box / "scripts" / "impl.sh").write_text("#!/bin/sh\nexit 0\n")
    (box / "scripts" / "impl.sh").chmod(0o755)
    (box / "scripts" / "pre-commit").symlink_to("impl.sh")
    (box / ".git" / "hooks" / "pre-commit").symlink_to("../../scripts/pre-commit")
    output, _ = sh("printf '#!/bin/sh\\ntouch PWNED\\n' > scripts/evil.sh; chmod +x scripts/evil.sh; "
                   "ln -sfn evil.sh scripts/pre-commit; echo planted")
    later = git_everywhere(box)
    assert "planted" in output and not pwned(box), (output, later)


def test_a_pointer_too_long_for_a_path_breaks_no_later_command(box):
    """`gitdir: aaa...` (5,000 a's) made every later command fail with "File name too long" (rt25d 37)."""
    make_repo(box)
    sh("mkdir n3 && printf 'gitdir: %05000d\\n' 0 | tr 0 a > n3/.git; echo planted")
    output, failed = sh("echo next")
    assert not failed and output.startswith("next"), output


# Red team rt22c: a git dir under another name, work trees other than the top, programs config names.

def stored_apart(lib: Path) -> str:
    """The nested repository's git dir lives beside it, found only through its `.git` file."""
    (lib / ".git").rename(lib.parent / "store")
    (lib / ".git").write_text("gitdir: ../store\n")
    return "vendor/store"


@pytest.mark.parametrize("place", [lambda lib: "vendor/lib/.git", stored_apart], ids=["dot-git", "stored-apart"])
def test_a_nested_git_dir_renamed_keeps_its_config_masked(box, place):
    """The mask went by the name `.git`: renamed (its HEAD moved first), the next command read the config."""
    make_repo(box)
    lib = nested_repository(box)
    git(lib, "config", "kesi.canary", "renamedcanary-3b7e")             # not a credential format: no output mask
    gitdir = place(lib)
    sh(f"mv {gitdir}/HEAD {gitdir}/HEAD.bak; mv {gitdir} vendor/g")
    output, _ = sh(f"cat vendor/g/config | rev; mv vendor/g {gitdir}; echo end")
    assert "renamedcanary-3b7e"[::-1] not in output and "end" in output, output


def global_hooks_path(root: Path, monkeypatch) -> None:
    """The person's own ~/.gitconfig names a relative hooks folder: git takes it in every repository."""
    config = root.parent / f"{root.name}.gitconfig"
    config.write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    nested_repository(root)


def linked_worktree(root: Path, monkeypatch) -> None:
    git(root, "config", "core.hooksPath", ".githooks")
    assert git(root, "worktree", "add", "-q", "wt").returncode == 0


def fsmonitor_program(root: Path, monkeypatch, name: str = "tools/fsmon.sh") -> None:
    (root / "tools").mkdir()
    (root / "tools" / "fsmon.sh").write_text("#!/bin/sh\n")
    (root / "tools" / "fsmon.sh").chmod(0o755)
    git(root, "config", "core.fsmonitor", name)


OTHER_WORK_TREES = {     # (prepare, what a command plants, where the person runs git later)
    "a linked worktree's relative hooksPath": (
        linked_worktree, "mkdir -p wt/.githooks && " + HOOK.format("wt/.githooks"), "wt"),
    "the global hooksPath in a nested repository": (
        global_hooks_path, "mkdir -p vendor/lib/.githooks && " + HOOK.format("vendor/lib/.githooks"), "vendor/lib"),
    "a work-tree fsmonitor program": (fsmonitor_program, "echo 'touch PWNED' >> tools/fsmon.sh", ""),
    "an fsmonitor program that does not exist yet": (
        lambda root, mp: fsmonitor_program(root, mp, "sh tools/later.sh"), "echo 'touch PWNED' > tools/later.sh", ""),
    "a nested repository's fsmonitor program": (
        lambda root, mp: fsmonitor_program(nested_repository(root), mp),
        "echo 'touch ../../PWNED' >> vendor/lib/tools/fsmon.sh", "vendor/lib"),
    "a program named in a repository made since the last command": (
        lambda root, mp: (sh("true"), fsmonitor_program(nested_repository(root), mp, "sh tools/later.sh")),
        "echo 'touch ../../PWNED' > vendor/lib/tools/later.sh", "vendor/lib"),
}


@pytest.mark.parametrize("name", OTHER_WORK_TREES)
def test_what_config_names_is_guarded_in_every_work_tree(box_or_bare, monkeypatch, name):
    box = box_or_bare
    make_repo(box)
    prepare, plant, where = OTHER_WORK_TREES[name]
    prepare(box, monkeypatch)
    output, _ = sh(plant + "; echo planted")
    later = git_everywhere(box / where)
    assert "planted" in output and not pwned(box), (output, later)


HAND_OVER = """import os, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect("\\0" + sys.argv[1])
socket.send_fds(s, [b"x"], [os.open(".git", os.O_RDONLY | os.O_DIRECTORY)])
s.recv(1)
"""
WRITE_LATER = """import os, pathlib, socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.bind("\\0" + sys.argv[1])
s.listen(1)
pathlib.Path("listening").touch()
c, _ = s.accept()
_, (git_fd,), _, _ = socket.recv_fds(c, 1, 1)
c.close()
while not os.path.exists("go"):
    time.sleep(0.05)
hook = os.open("hooks/pre-commit", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755, dir_fd=git_fd)
os.write(hook, b"#!/bin/sh\\ntouch PWNED\\n")
os.close(hook)
pathlib.Path("written").touch()
time.sleep(60)
"""


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path.exists(), path


def test_a_git_descriptor_a_command_hands_a_background_task_plants_nothing(box):
    """A foreground command sends an fd of its writable .git to a task, which writes a hook after the check."""
    make_repo(box)
    (box / "hand.py").write_text(HAND_OVER)
    (box / "later.py").write_text(WRITE_LATER)
    name = f"kesi-rt22c-{uuid.uuid4().hex}"
    text, failed = kesi.run_command(f"python3 later.py {name}", run_in_background=True)
    assert not failed, text
    wait_for(box / "listening")
    output, _ = sh(f"python3 hand.py {name}; echo handed")
    assert "handed" in output, output
    (box / "go").touch()
    kesi.BACKGROUND_TASKS[1].proc.wait(timeout=30)       # issue 22: the .git it was handed is read-only: it failed
    assert not (box / ".git" / "hooks" / "pre-commit").exists() and not (box / "written").exists()
    output, _ = sh("echo next")
    later = git_everywhere(box)
    assert "next" in output and not pwned(box), (output, later)


# --- issue 22: only git writes git dirs (rt22c round 2) ------------------------------------------
# A command that runs more than plain built-in git gets every known git dir read-only, as Codex's Linux sandbox
# keeps .git; only git-only commands keep the writable git dirs and the check after, which the bare runs test.

@pytest.mark.parametrize("command, git_only", [
    ("git add . && git commit -m x", True), ("git status", True), ("git checkout -b b", True),
    ("cd vendor/lib && git commit -am x", False), ("cd vendor/lib && make", False),     # another repository's hooks
    ("git -C vendor/lib log --oneline | cat", False), ("git -C node_modules/x commit -m x", False),
    ("git rebase --ex* HEAD~1", False), ("git add *.py", False), ("git add '*.py'", True),      # rt22d: a glob
    ("git log -1 --format=x --output=.git/info/exclude", False), ("git log -1 --outp=o", False),
    ("git reset --hard HEAD~1", True), ("git add ~/x", False), ("git add {a,b}", False), ("git rebase @{u}", True),
    ("make && git commit -m x", False), ("git rebase -x 'sh evil' HEAD~1", False), ("git rebase --exe=ls", False),
    ("GIT_DIR=x git status", False), ("git status > out", False), ("git -c core.pager=sh log", False),
    ("git st", False), ("git bisect run sh", False), ("git submodule foreach sh", False),
    ("git merge -s evil b", False), ("git commit -s -m x", True), ("git grep -Osh x", False),
    ("git init --template=t r", False), ("git clone -c core.hooksPath=h u d", False), ("git clone --conf=x u", False),
    ("git log $(sh evil)", False), ("git status; sh", False), ("git commit -m x 2>&1", True),
    ("git push >/dev/null 2>&1", True), ("git status 2>/dev/null", True), ("git status 2>&1x", False),
    ("git status 2>/dev/nullx", False), ("git status >/dev/null.txt", False), ("git log 2>&1 | sh", False),
    ("git config diff.external 'sh evil.sh' && git diff", False),      # rt22e: config never counts as git-only
    ("git clone -q ./s .git/lfs", False), ("git clone ./s ./.git/branches", False), ("git add x/.git", False),
    ("git fetch o refs/replace/a:refs/replace/a", False), ("git fetch o +a:replace/a", False),   # rt22f
    ("git add .gitignore .github/x", True), ("git clone -q u d", False), ("git init", False),
    ("git worktree add -q r/replace rep", False), ("git apply --directory=.git p.diff", False),   # rt22j
    ("git add :.git/x", False), ("git add my.git/x", True),        # rt22g: a work tree written through a link into .git
    ("git fetch u '+refs/*:refs/*'", False), ("git fetch u '*:*'", False), ("git remote add --mirror=fetch m u", False),
    ("git fetch u 'refs/heads/*:refs/remotes/u/*'", False), ("git log -- '*.py'", True)])   # rt22k: refspec globs
def test_only_plain_built_in_git_counts_as_git_only(command, git_only):
    assert kesi.runs_only_git(command) is git_only


PUSH_HOOK = ("git init -q --bare node_modules/e.git && printf '#!/bin/sh\\ntouch PWNED ../../PWNED; "
             "echo $PWD/node_modules/e.git > ../../.git/branches/origin\\n' > node_modules/e.git/hooks/pre-receive"
             " && chmod +x node_modules/e.git/hooks/pre-receive")


def test_git_alone_reaches_no_local_repository_whose_hooks_would_run_with_writable_git_dirs(box):
    """rt22f: `git push ./repo` is git alone, and ran that repository's pre-receive hook beside a writable .git."""
    make_repo(box)
    output, _ = sh(PUSH_HOOK)
    output, failed = sh("git push ./node_modules/e.git HEAD:refs/heads/x")
    assert failed and "not allowed" in output, output
    assert not pwned(box) and not (box / ".git" / "branches" / "origin").exists(), output


def test_a_work_tree_written_through_a_link_into_git_plants_no_replace_ref(box):
    """rt22g: `git worktree add r/replace rep`, r a link to .git/refs, checked a branch out into .git/refs/replace."""
    make_repo(box)
    assert git(box, "branch", "rep").returncode == 0
    sh("ln -s .git/refs r")
    output, failed = sh("git worktree add -q r/replace rep")
    assert failed and not (box / ".git" / "refs" / "replace").exists(), output


def test_git_alone_writes_no_git_dir_but_the_top_git(box):
    """rt22h: git refuses work-tree paths through `.git` only: with `.git` a file naming `.bare`, `git apply` of a
    patch creating `.bare/refs/replace/<blob>` (git alone, so git dirs writable) planted a replace ref."""
    assert git(box, "init", "-q", "--separate-git-dir=.bare", ".").returncode == 0
    (box / "f").write_text("safe\n")
    for args in (["add", "f"], ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "f"]):
        assert git(box, *args).returncode == 0
    (box / "p.patch").write_text("diff --git a/.bare/refs/replace/x b/.bare/refs/replace/x\nnew file mode 100644\n"
                                 "--- /dev/null\n+++ b/.bare/refs/replace/x\n@@ -0,0 +1 @@\n+planted\n")
    output, failed = sh("git apply p.patch")
    assert not (box / ".bare" / "refs" / "replace").exists(), output


SWAPPER = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
open("swapping", "w").close()
while not os.path.exists("stop"):
    libc.renameat2(-100, b"sub", -100, b"lnk", 2)          # RENAME_EXCHANGE: a folder and a link trade places
"""


def test_grep_reads_nothing_through_a_folder_a_task_swaps_for_a_link(box, tmp_path_factory):
    """rt22g: rg opens what it listed by path; a task swapping a folder for a link to outside leaked its lines."""
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_text("TOPSECRET outside\n")
    (box / "sub").mkdir()
    (box / "sub" / "secret.txt").write_text("harmless\n")
    os.symlink(outside, box / "lnk")
    (box / "swap.py").write_text(SWAPPER)
    text, failed = kesi.run_command("python3 swap.py", run_in_background=True)
    assert not failed, text
    wait_for(box / "swapping")
    try:
        found = [output for output, _ in (kesi.grep("TOPSECRET") for _ in range(60)) if ":TOPSECRET outside" in output]
    finally:
        (box / "stop").touch()
    assert not found, found[:3]


def test_an_old_style_remote_a_command_plants_is_put_back(bare):
    """rt22f: .git/branches/<name> and .git/remotes/<name> name a URL `git push` uses when the config names none."""
    make_repo(bare)
    output, _ = sh("mkdir -p .git/remotes && echo /tmp/elsewhere > .git/branches/origin && "
                   "printf 'URL: /tmp/elsewhere\\n' > .git/remotes/upstream")
    assert "KeSi put back .git/branches/origin" in output and "remotes/upstream" in output, output
    assert not (bare / ".git" / "branches" / "origin").exists() and not (bare / ".git" / "remotes" / "upstream").exists()


def test_git_alone_runs_no_program_from_the_workspace_s_path(box, monkeypatch):
    """rt22d: `git fetch x::y` runs git-remote-x from PATH (so would ssh, gpg or an editor), and an activated
    .venv/bin lies in the workspace, where commands write: git alone, its git dirs writable, does not look there."""
    make_repo(box)
    folder = box / ".venv" / "bin"
    folder.mkdir(parents=True)
    (folder / "git-remote-rtx").write_text(f"#!/bin/sh\ntouch {box}/HELPER-RAN\n")
    (folder / "git-remote-rtx").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    output, failed = sh("git fetch rtx::whatever")
    assert failed and not (box / "HELPER-RAN").exists(), output
    sh("git-remote-rtx")          # any other command keeps the project's PATH (and sees the git dirs read-only)
    assert (box / "HELPER-RAN").exists()


def test_a_command_running_more_than_git_cannot_write_any_known_git_dir(box):
    make_repo(box)
    lib = nested_repository(box)
    store = stored_apart(lib)
    for target in (".git/hooks/pre-commit", ".git/commondir", f"{store}/hooks/pre-commit", f"{store}/commondir"):
        output, failed = sh(f"echo 'touch PWNED' > {target}; ls > /dev/null")
        assert failed or "Read-only file system" in output, output
        assert not (box / target).exists() and "put back" not in output, output
    output, failed = sh("echo c > c.txt && git add c.txt")
    assert failed and "run the git command on its own" in output, output
    later = git_everywhere(box) + git_everywhere(lib)
    assert not pwned(box), later


def test_a_background_task_cannot_write_a_nested_git_dir(box):
    """rt22c LEAK 2's plant: a hook in a nested repository, by a task."""
    task = plant_in_the_background(box, "a hook in a nested repository")
    task.proc.wait(timeout=30)
    assert not (box / "vendor" / "lib" / ".git" / "hooks" / "pre-commit").exists()
    assert b"Read-only file system" in task.output.since(0)[0]


def test_a_background_task_that_ended_by_itself_is_checked_at_exit(box, notices):
    """rt22c LEAK 2: stop_background_tasks checked only while a task still ran."""
    plant_in_the_background(box, "a new repository").proc.wait(timeout=30)
    kesi.stop_background_tasks()                   # as at KeSi's exit
    assert "KeSi put back src/.git/config: core.fsmonitor, which background task 1" in notices.getvalue()
    later = used_later(box)
    assert not pwned(box), later


def test_an_exec_line_after_a_megabyte_of_a_to_do_list_is_taken_out(box_or_bare):
    """rt22c LEAK 3: only the first 1 MB of a to-do list was read."""
    box = box_or_bare
    make_repo(box)
    (box / "b.txt").write_text("b\n")
    git(box, "add", "b.txt"), git(box, "commit", "-qm", "second")
    # 1.1 MB in long comment lines: git takes seconds a thousand lines to go on after a rebase's to-do list
    pad = "python3 -c \"open('.git/rebase-merge/git-rebase-todo', 'a').write(('# ' + 'p' * 998 + '\\n') * 1100 + " \
          "'exec touch PWNED\\n')\""
    sh(f"GIT_SEQUENCE_EDITOR='sed -i 1s/^pick/edit/' git rebase -i HEAD~1 >/dev/null 2>&1; {pad}")
    later = subprocess.run(["git", "rebase", "--continue"], cwd=box, env={**os.environ, **GIT_ENV},
                           capture_output=True, text=True, timeout=30)
    assert not pwned(box), later


def test_a_repository_registered_by_a_submodule_s_own_index_is_disarmed(box_or_bare):
    """rt22c LEAK 5: a repository in node_modules registered by a submodule's index, not the top one."""
    box = box_or_bare
    make_repo(box)
    first, _ = sh("git init -q x && git init -q x/node_modules/evil && "
                  "git -C x/node_modules/evil -c user.name=a -c user.email=a@b commit -q --allow-empty -m i && "
                  "git -C x/node_modules/evil config core.fsmonitor 'touch ../../../PWNED; false' && "
                  "git -C x add node_modules/evil && git -C x -c user.name=a -c user.email=a@b commit -q -m sub")
    output, _ = sh("git add x")         # x's own index is read at once (rt37b 33), before the top registers x
    assert "x/node_modules/evil/.git/config: core.fsmonitor" in first + output, first + output
    later = git_everywhere(box)
    assert not pwned(box), later


def test_an_index_rewritten_in_place_with_its_old_mtime_is_read_again(box_or_bare):
    """rt22c LEAK 6: the submodule list was cached by the index's inode, size and mtime."""
    box = box_or_bare
    make_repo(box)
    sh("mkdir -p node_modules && echo x > node_modules/evix && git add node_modules/evix")
    output, _ = sh("git init -q node_modules/evil && git -C node_modules/evil -c user.name=a -c user.email=a@b "
                   "commit -q --allow-empty -m i && "
                   "git -C node_modules/evil config core.fsmonitor 'touch ../../PWNED; false'; "
                   "H=$(git -C node_modules/evil rev-parse HEAD); cp .git/index idx; "
                   "GIT_INDEX_FILE=idx git update-index --force-remove node_modules/evix; "
                   "GIT_INDEX_FILE=idx git update-index --add --cacheinfo 160000,$H,node_modules/evil; "
                   "M=$(stat -c %y .git/index); cat idx > .git/index; touch -d \"$M\" .git/index")
    later = git_everywhere(box)
    assert not pwned(box), (output, later)


LAZY_FETCH = """cp -r .git evil; rm -f evil/config
printf '[core]\\n\\trepositoryformatversion = 1\\n[extensions]\\n\\tpartialClone = origin\\n' > evil/config
printf '[remote "origin"]\\n\\turl = "ext::sh payload.sh"\\n\\tpromisor = true\\n' >> evil/config
printf '[protocol "ext"]\\n\\tallow = always\\n' >> evil/config
echo 'touch "$PWD/ESCAPED"' > payload.sh
echo ../evil > .git/commondir
mkdir -p d && echo x > d/f && echo y > top && git add d top && git commit -q -m d
git sparse-checkout init --cone --sparse-index && git sparse-checkout set d2 --skip-checks
T=$(git rev-parse HEAD:d); rm -f evil/objects/$(echo $T|cut -c1-2)/$(echo $T|cut -c3-)
"""


def test_kesi_s_own_git_fetches_nothing_a_planted_config_names(box):
    """rt22c LEAK 7: KeSi's `git ls-files` lazy-fetched through a planted ext:: promisor remote, outside."""
    make_repo(box)
    subprocess.run(["sh", "-c", LAZY_FETCH], cwd=box, env={**os.environ, **GIT_ENV}, capture_output=True)
    assert (box / ".git" / "commondir").exists() and not (box / "ESCAPED").exists()
    listed = kesi.run_git(["ls-files", "--stage", "-z"])
    assert listed is not None and not (box / "ESCAPED").exists(), listed


def test_a_lazy_fetch_planted_by_a_command_does_not_run_in_kesi_s_check(box_or_bare, monkeypatch):
    box = box_or_bare
    make_repo(box)
    for name, value in GIT_ENV.items():
        monkeypatch.setenv(name, value)
    (box / "lazy.sh").write_text(LAZY_FETCH)
    output, _ = sh("sh lazy.sh")
    assert not (box / "ESCAPED").exists(), output


def test_a_copied_git_dir_is_no_move_of_the_one_it_copies(box_or_bare):
    """rt22c LEAK 1: a file removed here and the same one made there read as a move, and the old place was skipped."""
    box = box_or_bare
    make_repo(box)
    sh("git init -q vendor/a && git -C vendor/a -c user.name=a -c user.email=a@b commit -q --allow-empty -m i && "
       "git init -q vendor/b && mkdir vendor/a/.git/zz && echo x > vendor/a/.git/zz/opts && "
       "cp -r vendor/a/.git vendor/evil")
    output, _ = sh("cp -p vendor/a/.git/zz/opts o && rm vendor/a/.git/zz/opts && mkdir -p vendor/b/.git/zz && "
                   "cp -p o vendor/b/.git/zz/opts && printf '[core]\\n\\trepositoryformatversion = 0\\n\\t"
                   "fsmonitor = \"touch $PWD/PWNED; false\"\\n' > vendor/evil/config && "
                   "echo ../../evil > vendor/a/.git/commondir && "
                   "printf '#!/bin/sh\\ntouch PWNED\\n' > vendor/a/.git/hooks/pre-commit && "
                   "chmod +x vendor/a/.git/hooks/pre-commit && "
                   "git update-index --add --cacheinfo 160000,$(git -C vendor/a rev-parse HEAD),vendor/a")
    assert "found at" not in output, output
    later = git_everywhere(box) + git_everywhere(box / "vendor" / "a")
    assert not pwned(box), later


def test_a_copied_submodule_git_dir_is_no_move_either(with_submodule, monkeypatch):
    """rt22c LEAK 1, the user's own submodule: its hooks sample moved to a copy, its commondir planted."""
    monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)
    root = with_submodule
    output, _ = sh("M=.git/modules; mkdir -p $M/t/hooks && cp -p $M/sub/hooks/pre-commit.sample $M/t/hooks/ && "
                   "rm $M/sub/hooks/pre-commit.sample && cp -r $M/sub evil && rm -f evil/config && printf '[core]\\n"
                   "\\trepositoryformatversion = 0\\n\\tfsmonitor = \"touch $PWD/PWNED; false\"\\n' > evil/config && "
                   "echo ../../../evil > $M/sub/commondir")
    assert not (root / ".git" / "modules" / "sub" / "commondir").exists(), output
    later = git_everywhere(root)
    assert not pwned(root), later


def test_a_nested_repository_moved_keeps_the_person_s_hooks_and_config(box_or_bare):
    """rt22c LEAK 8: renaming a folder above a nested repository made it look new, and KeSi stripped it."""
    box = box_or_bare
    make_repo(box)
    lib = nested_repository(box)
    (lib / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\necho mine\n")
    git(lib, "config", "alias.st", "status")
    output, _ = sh("mv vendor old-vendor; mv vendor/lib vendor/b; echo moved")
    lib = next(p for p in (box / "vendor" / "lib", box / "vendor" / "b", box / "old-vendor" / "lib") if p.exists())
    assert (lib / ".git" / "hooks" / "pre-commit").read_text() == "#!/bin/sh\necho mine\n", output
    assert git(lib, "config", "alias.st").stdout == "status\n", output


# --- rt22l: git dirs known by what they hold, other repositories' linked hooks, replace refs in data files ------

@pytest.mark.parametrize("name", ["backup.git", ".bare", "linked.git", "filed.git"])
def test_a_bare_repository_in_the_work_tree_is_guarded(box_or_bare, name):
    """A local push target, or the `.bare` beside linked worktrees: its hooks run on the person's push or commit.
    rt22o: git takes a folder whose objects/ is a link for a repository too; rt22p: or whose refs is a file git
    may enter (it only asks access())."""
    box = box_or_bare
    make_repo(box)
    assert git(box, "init", "-q", "--bare", name).returncode == 0
    if name == "linked.git":
        (box / name / "objects").rename(box / "objs")
        (box / name / "objects").symlink_to("../objs")
    if name == "filed.git":
        shutil.rmtree(box / name / "refs")
        (box / name / "refs").write_text("")
        (box / name / "refs").chmod(0o755)
        assert git(box / name, "rev-parse", "--git-dir").stdout.strip() == ".", "git takes it for a repository"
    output, _ = sh(f"printf '#!/bin/sh\\ntouch PWNED\\n' > {name}/hooks/pre-receive; echo planted")
    assert "planted" in output and not (box / name / "hooks" / "pre-receive").exists(), output


def test_a_template_folder_git_config_names_is_guarded(box_or_bare):
    """rt22p: init.templateDir's hooks are copied into each repository the person clones or makes later, and run."""
    box = box_or_bare
    make_repo(box)
    git(box, "config", "init.templateDir", "tpl")
    output, _ = sh("mkdir -p tpl/hooks && echo 'touch PWNED' > tpl/hooks/post-checkout; echo planted")
    assert "planted" in output and not (box / "tpl" / "hooks" / "post-checkout").exists(), output


def test_a_new_repository_keeps_no_hook_your_relative_hooks_path_names(box_or_bare, tmp_path_factory, monkeypatch):
    """rt22p: with your core.hooksPath = .githooks, a repository made in the same command as its .githooks had the
    plant taken for its starting point. What the command made goes; a project's older .githooks stays."""
    box = box_or_bare
    make_repo(box)
    config = tmp_path_factory.mktemp("config") / "gitconfig"
    config.write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    plant = "mkdir -p {0}/.githooks && echo 'touch PWNED' > {0}/.githooks/pre-commit && git init -q {0}; echo planted"
    output, _ = sh(plant.format("vendor/x"))
    assert "planted" in output and not (box / "vendor" / "x" / ".githooks" / "pre-commit").exists(), output
    assert "vendor/x/.githooks" in output, output
    (box / "old" / ".githooks").mkdir(parents=True)                 # a project's own, from before KeSi started
    (box / "old" / ".githooks" / "pre-commit").write_text("#!/bin/sh\necho ours\n")
    monkeypatch.setattr(kesi, "KESI_STARTED", time.time() + 1)
    output, _ = sh("git init -q old; echo made")
    assert "made" in output and (box / "old" / ".githooks" / "pre-commit").exists(), output


def test_the_script_a_nested_repositorys_hook_links_to_is_guarded(box_or_bare):
    box = box_or_bare
    lib = nested_repository(box)
    (lib / "tools").mkdir()
    (lib / "tools" / "hook.sh").write_text("#!/bin/sh\ntrue\n")
    (lib / ".git" / "hooks" / "pre-commit").symlink_to("../../tools/hook.sh")
    output, _ = sh("echo 'touch PWNED' >> vendor/lib/tools/hook.sh; echo planted")
    assert "planted" in output and "PWNED" not in (lib / "tools" / "hook.sh").read_text(), output


def test_replace_refs_and_grafts_planted_in_data_files_are_taken_out(bare):
    """packed-refs and refs/replace are data git keeps, but a replace ref or graft hides a change from git diff."""
    make_repo(bare)
    head = git(bare, "rev-parse", "HEAD").stdout.strip()
    (bare / ".git" / "packed-refs").write_text(f"# pack-refs with: peeled fully-peeled sorted\n{head} refs/heads/x\n")
    plant = (f"printf '{head} refs/replace/{'1' * 40}\\n' >> .git/packed-refs && mkdir -p .git/refs/replace && "
             f"echo {head} > .git/refs/replace/{'2' * 40} && mkdir -p .git/info && echo {head} > .git/info/grafts")
    output, _ = sh(plant + "; echo planted")
    assert "planted" in output and "refs/replace" not in (bare / ".git" / "packed-refs").read_text(), output
    assert f"{head} refs/heads/x" in (bare / ".git" / "packed-refs").read_text()       # the rest kept
    assert not list((bare / ".git" / "refs" / "replace").iterdir()), output
    assert not (bare / ".git" / "info" / "grafts").read_text().strip(), output


def test_a_top_git_link_a_task_swaps_for_a_planted_folder_is_put_back(box):
    """rt22l: a `.git` that is a link was never pinned, yet the check between commands skipped it as if it were."""
    make_repo(box)
    os.rename(box / ".git", box / ".repo")
    (box / ".git").symlink_to(".repo")
    sh("true")                                       # the state tasks start from: .git a link
    text, failed = kesi.start_background_task("rm .git && mkdir -p .git/hooks && printf '#!/bin/sh\\ntouch PWNED\\n' "
                                              "> .git/hooks/pre-commit && touch swapped; sleep 60")
    assert not failed, text
    deadline = time.monotonic() + 60
    while not (box / "swapped").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    kesi.stop_background_tasks()
    assert (box / "swapped").exists() and (box / ".git").is_symlink(), list(box.iterdir())


def test_git_through_a_work_tree_link_into_git_is_not_git_only_and_info_files_are_guarded(bare):
    """rt22m: `git mv` renamed .git/COMMIT_EDITMSG to info/attributes through `lnk -> .git` (a diff hidden)."""
    make_repo(bare)
    (bare / "lnk").symlink_to(".git")
    assert kesi.runs_only_git("git mv -f a.txt b.txt") and kesi.runs_only_git("git commit -m 'x: y'")
    assert not kesi.runs_only_git("git mv -f lnk/COMMIT_EDITMSG lnk/info/attributes")
    assert not kesi.runs_only_git("git add lnk")
    output, _ = sh("mkdir -p .git/info && echo 'a.txt -diff' > .git/info/attributes && echo 'PWNED' >> "
                   ".git/info/exclude; echo planted")
    assert "planted" in output and not (bare / ".git" / "info" / "attributes").exists(), output
    assert "PWNED" not in (bare / ".git" / "info" / "exclude").read_text()


# --- rt22: the check after a command fails closed; new repositories keep nothing git runs or contacts later ---------

DEEP_CHAIN = ("python3 -c \"import os\nos.makedirs('{0}', exist_ok=True); os.chdir('{0}')\n"
              "for i in range(1500): os.mkdir('d'); os.chdir('d')\"")
NEW_FSMONITOR = ("git init -q sub && git -C sub -c user.name=a -c user.email=b commit --allow-empty -qm x && "
                 "git -C sub config core.fsmonitor 'touch ../PWNED; false'")


def person_s_git_later(root: Path, repo: str = "sub") -> str:
    """The person, later, outside: registers the new repository, then status and a commit at the top and in it."""
    later = git(root, "add", repo).stderr + git_everywhere(root)
    later += git(root / repo, "status").stdout
    return later + git(root / repo, "commit", "-q", "--allow-empty", "-m", "x").stderr


@pytest.mark.parametrize("chain", ["sub/.git/hooks/deep", "sub/.git/config.lock", "sub/.git/modules/m",
                                   "sub/.git/rebase-merge"])
def test_a_deep_folder_chain_stops_no_part_of_the_check(box, chain):
    """rt22 rows 60-64: shutil.rmtree and os.walk recursed once per level; RecursionError aborted the whole check
    (nothing disarmed, no put-back in known places either) and, under modules/, every later command."""
    make_repo(box)
    git(box, "config", "core.hooksPath", ".githooks")            # the person's: its folder not made yet
    output, _ = sh(f"mkdir -p .githooks && printf '#!/bin/sh\\ntouch PWNED\\n' > .githooks/pre-commit && "
                   f"chmod +x .githooks/pre-commit && {NEW_FSMONITOR} && {DEEP_CHAIN.format(chain)}; echo planted")
    assert "planted" in output and "RecursionError" not in output, output
    assert not (box / ".githooks" / "pre-commit").exists(), output
    again, failed = sh("echo next")
    assert not failed and "next" in again, again
    later = person_s_git_later(box)
    subprocess.run(["rm", "-rf", str(box / "sub")], check=True)      # pytest's own rmtree recurses
    assert not pwned(box), (output, later)


def test_the_check_never_raises_and_keeps_no_plant_as_its_baseline(box, monkeypatch, notices):
    """Whatever fails in the check is said loudly (to the person too), and the repository is not the next command's
    clean baseline."""
    make_repo(box)
    monkeypatch.setattr(kesi, "disarm_git_dir", lambda *a, **k: 1 / 0)     # any bug at all
    monkeypatch.setattr(os, "rename", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EPERM, "no")))
    output, failed = sh(NEW_FSMONITOR + "; echo planted")
    assert failed and "could not make" in output and "sub/.git" in output, output
    assert "WARNING: KeSi could not make safe sub/.git" in notices.getvalue(), notices.getvalue()
    monkeypatch.undo()
    monkeypatch.setattr(kesi, "KILL_GRACE_SECONDS", 0.5)
    output, _ = sh("echo next")
    assert "sub/.git/config: core.fsmonitor" in output, output
    later = person_s_git_later(box)
    assert not pwned(box), later


@pytest.fixture(params=["TMPDIR elsewhere", "TMPDIR on it"])
def small_disk(box, monkeypatch, request):
    """A workspace alone on a small file system (a tmpfs; needs root), maybe TMPDIR too: a command can fill it."""
    disk = Path(tempfile.mkdtemp(prefix="kesi-small-disk-", dir="/var/tmp"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m,nr_inodes=4000", "tmpfs", str(disk)],
                      capture_output=True).returncode:
        disk.rmdir()
        pytest.skip("mounting a tmpfs needs root")
    (disk / "p").mkdir()
    (disk / "tmp").mkdir()
    if request.param == "TMPDIR on it":
        monkeypatch.setattr(tempfile, "tempdir", str(disk / "tmp"))
    old = kesi.BASE_DIR
    kesi.BASE_DIR = disk / "p"
    make_repo(disk / "p")
    yield disk / "p"
    kesi.stop_background_tasks()
    kesi.BASE_DIR = old
    subprocess.run(["umount", "-l", str(disk)], check=False)
    disk.rmdir()


@pytest.mark.parametrize("fill", ["fallocate -l $(df --output=avail -B1 . | tail -1) fill; "
                                  "dd if=/dev/zero of=fill2 bs=4k 2>/dev/null",
                                  "mkdir many && cd many && i=0; while touch f$i 2>/dev/null; do i=$((i+1)); done"])
def test_a_full_disk_leaves_no_plant_in_a_new_repository(small_disk, fill):
    """rt22 rows 12, 13, 40: the cleaned config could not be written (no blocks, no inodes) yet was reported put
    back; removing needs no room, so a config that cannot be cleaned goes."""
    root = small_disk
    output, _ = sh(f"{NEW_FSMONITOR} && {fill}; echo planted")       # (a hook removed would free room)
    assert "planted" in output and "sub/.git" in output, output
    subprocess.run(["rm", "-rf", str(root / "fill"), str(root / "fill2"), str(root / "many")], check=True)
    config = root / "sub" / ".git" / "config"
    assert not config.exists() or "fsmonitor" not in config.read_text(), output
    later = person_s_git_later(root)
    assert not pwned(root), (output, later)


def test_a_new_config_with_many_planted_keys_goes_whole_at_once(box):
    """rt36b 38-39: 110,000 junk keys beside a planted core.fsmonitor made the check run one git a key, ten minutes
    a repository, the plant live all the while. More than a few keys to take out: the config goes whole."""
    junk = "".join(f"\tk{i} = v\n" for i in range(20_000))
    (box / "junk.txt").write_text(f"[core]\n\tfsmonitor = touch {box}/PWNED\n[junk]\n{junk}")
    output, _ = sh("git init -q sub && cat junk.txt >> sub/.git/config && rm junk.txt && echo planted")
    assert "planted" in output, output
    assert not (box / "sub" / ".git" / "config").exists(), output
    git(box / "sub", "status")
    assert not pwned(box), output


def test_a_command_making_many_repositories_has_those_past_the_limit_lose_their_config(box):
    """rt37b 4: 1,500 new repositories, each with core.fsmonitor planted, were disarmed one by one with git runs:
    minutes of check, and a KeSi killed meanwhile left most armed. Past MAX_NEW_REPOSITORIES their configs go whole,
    with no git run; moving them aside instead left them armed for a later .git file to point at (rt37h B22-B27)."""
    count = kesi.MAX_NEW_REPOSITORIES + 6
    output, _ = sh(f"git init -q r0 && git -C r0 config core.fsmonitor 'touch {box}/PWNED' && "
                   f"for i in $(seq 1 {count - 1}); do mkdir r$i && cp -r r0/.git r$i/.git; done; echo made")
    assert "made" in output, output
    configs = [repo / ".git" / "config" for repo in box.glob("r*")]
    assert len(configs) == count and sum(not config.exists() for config in configs) == 6, output
    assert not [config for config in configs if config.exists() and "fsmonitor" in config.read_text()]
    assert "more: git's control files" in output, output           # every one is named (ten of them in full)
    sh("i=0; for d in r*/.git*; do i=$((i+1)); mkdir s$i && echo \"gitdir: ../$d\" > s$i/.git; done")
    for repo in [*box.glob("r*"), *box.glob("s*")]:
        git(repo, "status")
    assert not pwned(box), output


def test_submodules_past_what_kesi_reads_are_said_to_be_unchecked(box, monkeypatch, notices):
    """rt37b 10: `git add .` registered 10,001 repositories in node_modules; the walk of indexes stopped at 10,000, so
    one that a registered repository's own index registers, with core.fsmonitor planted, was never disarmed and ran on
    the person's git status at the top. Past the limit, the check fails as a whole, loudly."""
    monkeypatch.setattr(kesi, "MAX_REGISTERED", 3)
    make_repo(box)
    sha = git(box, "rev-parse", "HEAD").stdout.strip()
    output, _ = sh("mkdir node_modules && cd node_modules && for i in 0 1 2 3 4; do git init -q m$i && "
                   "git -C m$i -c user.name=a -c user.email=b commit -q --allow-empty -m x; done && "
                   f"git init -q m0/deep && git -C m0/deep config core.fsmonitor 'touch {box}/PWNED' && "
                   f"git -C m0 update-index --add --cacheinfo 160000,{sha},deep && echo made")
    assert "made" in output, output
    output, _ = sh("git add " + " ".join(f"node_modules/m{i}" for i in range(5)))
    assert "(exit code 0)" in output, output
    assert "not all were checked" in output + notices.getvalue(), output


@pytest.mark.parametrize("parts", [5, 41, 45])
def test_a_new_repositorys_module_with_a_long_name_keeps_no_hook(box, parts):
    """rt37b 21: a submodule's git dir under .git/modules, named with 41 parts (git allows any number), kept its
    planted hooks: the walk stopped at 40. The person's `git submodule update --init` ran them."""
    name = "/".join(f"n{i}" for i in range(1, parts + 1))
    hook = f".git/modules/{name}/hooks/post-checkout"
    output, _ = sh("git init -q S && cd S && echo s > s && git add s && git -c user.name=a -c user.email=b "
                   "commit -qm s && cd .. && "
                   f"git init -q R && cd R && mkdir -p .git/modules/{name} && cp -r ../S/.git/. .git/modules/{name}/ && "
                   f"printf '#!/bin/sh\\ntouch {box}/PWNED\\n' > {hook} && chmod +x {hook} && echo built")
    assert "built" in output, output
    assert not (box / "R" / hook).exists(), output


@pytest.mark.parametrize("link", [".git/modules/m", ".git/modules", ".git/worktrees"])
def test_a_new_repositorys_modules_that_link_elsewhere_are_taken_out(box, link):
    """rt37b 23: a new repository's .git/modules/m was a link to a git dir in node_modules, with a planted hook; no
    walk goes there, so the hook stayed, and the person's `git submodule update --init` ran it."""
    target = "node_modules/evil/.git" + ("" if link.endswith("/m") else "/modules")
    depth = "../" * link.count("/")
    output, _ = sh(f"git init -q node_modules/evil && mkdir -p {target} && "
                   f"printf '#!/bin/sh\\ntouch {box}/PWNED\\n' > node_modules/evil/.git/hooks/post-checkout && "
                   f"git init -q R && mkdir -p R/{os.path.dirname(link)} && rm -rf R/{link} && "
                   f"ln -s {depth}../{target} R/{link} && echo built")
    assert "built" in output, output
    assert not os.path.lexists(box / "R" / link), output


@pytest.mark.parametrize("folder", ["node_modules/sub", ".venv/sub"])
def test_a_submodule_a_new_repository_registers_in_an_unwalked_folder_is_disarmed(box, folder):
    """rt37b 33, 39: a new repository R (not the top's submodule) whose own index registers node_modules/sub, a repo
    with core.fsmonitor: only the top's registrations were followed, and the person's git status in R ran it."""
    output, _ = sh(f"git init -q R && cd R && git init -q {folder} && "
                   f"git -C {folder} config core.fsmonitor 'touch {box}/PWNED' && "
                   f"git -C {folder} -c user.name=a -c user.email=b commit -q --allow-empty -m x && "
                   f"git add {folder} && echo registered")
    assert "registered" in output, output
    git(box / "R", "status")
    assert not pwned(box), output


def test_a_new_repository_keeps_only_a_clones_fetch_refspec(box):
    """rt37e 2: a new repository's `remote.origin.fetch +refs/*:refs/*` stayed (a fresh config's key), and the person's
    `git pull` there filled refs/replace from the remote, hiding a change from git diff."""
    output, _ = sh("git init -q y && git -C y remote add origin https://example.com/r.git && "
                   "git -C y config --add remote.origin.fetch '+refs/*:refs/*' && "
                   "git init -q z && git -C z remote add origin https://example.com/r.git && echo made")
    assert "made" in output, output
    assert git(box / "y", "config", "--get-all", "remote.origin.fetch").stdout == "", output
    assert git(box / "z", "config", "--get-all", "remote.origin.fetch").stdout == "+refs/heads/*:refs/remotes/origin/*\n"


def test_a_module_git_dir_behind_a_lone_head_file_keeps_no_hook(box):
    """rt37d B4: a submodule named a/b, and a HEAD file in .git/modules/a: KeSi took a for a git dir and never looked
    at b, where git found the hook on the person's `git submodule update --init`."""
    hook = ".git/modules/a/b/hooks/post-checkout"
    output, _ = sh("git init -q R && cd R && mkdir -p .git/modules/a && git init -q --bare .git/modules/a/b && "
                   f"echo 'ref: refs/heads/main' > .git/modules/a/HEAD && printf '#!/bin/sh\\ntouch {box}/PWNED\\n' "
                   f"> {hook} && chmod +x {hook} && echo built")
    assert "built" in output, output
    assert not (box / "R" / hook).exists(), output


@pytest.mark.parametrize("spoil", ["git config core.repositoryformatversion 1 && git config extensions.zzz 1",
                                   "printf '[broken\\n' >> .git/config"])
def test_a_new_repository_git_could_not_read_has_its_submodules_checked_once_disarmed(box, spoil):
    """rt37d B5: a new repository whose config git refused (an unknown extension, a broken line) hid the submodule
    its index registers in node_modules; KeSi's clean-up then made it readable, and `git status` there ran it."""
    output, _ = sh("git init -q R && cd R && git init -q node_modules/sub && "
                   f"git -C node_modules/sub config core.fsmonitor 'touch {box}/PWNED' && "
                   "git -C node_modules/sub -c user.name=a -c user.email=b commit -q --allow-empty -m x && "
                   f"git add node_modules/sub && {spoil} && echo registered")
    assert "registered" in output, output
    git(box / "R", "status")
    assert not pwned(box), output


def test_an_index_that_is_a_fifo_holds_no_check(box, monkeypatch):
    """rt37g B11: a new repository's index made a FIFO: KeSi's git ls-files waited on it (30 s a run), at every check.
    git status cannot use such an index either, so it registers nothing: read as empty, at once."""
    monkeypatch.setattr(kesi, "run_git", lambda *a, **k: pytest.fail(f"git run on a FIFO index: {a}"))
    make_repo(box)
    (box / ".git" / "index").unlink()
    os.mkfifo(box / ".git" / "index")
    assert kesi.gitlinks(box, box / ".git") == []


def test_a_new_repository_keeps_no_rebase_or_sequencer_state(box):
    """rt22 rows 23, 26: an `exec` line in a new repository's to-do ran on the person's `git rebase --continue`."""
    todo = "GIT_SEQUENCE_EDITOR=\"sh -c 'printf \\\"break\\\\nexec touch $PWD/PWNED\\\\n\\\" > \\$1' -\""
    output, _ = sh("git init -q . && echo 1 > f && git add f && git -c user.name=a -c user.email=b commit -qm 1 && "
                   "echo 2 > f && git -c user.name=a -c user.email=b commit -qam 2 && "
                   f"{todo} git -c user.name=a -c user.email=b rebase -i HEAD~1; "
                   "git -c user.name=a -c user.email=b cherry-pick --no-commit HEAD~1 HEAD >/dev/null 2>&1; "
                   "mkdir -p .git/sequencer && printf 'pick HEAD\\nexec touch PWNED\\n' > .git/sequencer/todo; "
                   "ls .git")
    assert "rebase-merge" in output, output
    for state in ("rebase-merge", "rebase-apply", "sequencer"):
        assert not (box / ".git" / state).exists(), output
    later = [git(box, *args) for args in (["rebase", "--continue"], ["cherry-pick", "--continue"], ["status"])]
    assert not pwned(box), [p.stdout + p.stderr for p in later]


LOCAL_REMOTES = {
    "a path": "git remote add origin \"$PWD/../node_modules/x.git\"",
    "a file:// push URL": "git remote add origin https://example.com/r.git && "
                          "git remote set-url --push origin \"file://$PWD/../node_modules/x.git\"",
    "a branch's remote that is a path": "git config branch.master.remote \"$PWD/../node_modules/x.git\"",
    "an old-style remote": "mkdir -p .git/remotes && printf 'URL: %s\\nPush: master\\n' \"$PWD/../node_modules/x.git\" "
                           "> .git/remotes/origin",
    "an insteadOf": "git remote add origin https://example.com/r.git && "
                    "git config url.\"$PWD/../node_modules/x.git\".insteadOf https://example.com/r.git",
}


@pytest.mark.parametrize("name", LOCAL_REMOTES)
def test_a_new_repository_keeps_no_remote_that_is_a_local_repository(box, name):
    """rt22 rows 24, 25, 42: a push to a bare repository in an unwalked folder ran its hooks outside."""
    make_repo(box)
    output, _ = sh("mkdir -p node_modules && git init -q --bare node_modules/x.git && "
                   "printf '#!/bin/sh\\ntouch ../../PWNED\\n' > node_modules/x.git/hooks/pre-receive && "
                   "chmod +x node_modules/x.git/hooks/pre-receive && git init -q -b master sub && cd sub && "
                   "echo 1 > f && git add f && git -c user.name=a -c user.email=b commit -qm 1 && "
                   f"git config branch.master.merge refs/heads/master && {LOCAL_REMOTES[name]}; echo planted")
    assert "planted" in output, output
    pushes = [git(box / "sub", *args) for args in (["push"], ["push", "origin"], ["push", "origin", "master"])]
    assert not pwned(box), (output, [p.stderr for p in pushes])


def test_a_new_repository_keeps_a_network_remote_but_no_partial_clone(box):
    """rt22 rows 39, 44: partialClone made the person's `git diff` fetch lazily from any host, past the allowlist."""
    output, _ = sh("git init -q . && echo v1 > f && git add f && git -c user.name=a -c user.email=b commit -qm 1 && "
                   "git remote add origin https://example.com/exfil/data && git config remote.origin.promisor true && "
                   "git config core.repositoryformatversion 1 && git config extensions.partialClone origin && "
                   "git config remote.origin.partialclonefilter blob:none; echo planted")
    config = git(box, "config", "--list", "--local").stdout.lower()
    assert "remote.origin.url=https://example.com/exfil/data" in config, (output, config)
    assert "partialclone" not in config and "promisor" not in config, (output, config)


def test_git_credentials_beside_the_config_read_as_empty(box):
    """rt22 rows 50-52: old-style remotes, a file the config includes, the credential store the config names."""
    make_repo(box)
    nested_repository(box)
    assert git(box, "init", "-q", "--bare", "backup.git").returncode == 0       # a bare one, known by content
    for git_dir in (box / ".git", box / "vendor" / "lib" / ".git", box / "backup.git"):
        (git_dir / "branches").mkdir(exist_ok=True)
        (git_dir / "branches" / "bb").write_text("https://oauth2:tokA-oldstyle@example.com/x.git#main\n")
        (git_dir / "remotes").mkdir(exist_ok=True)
        (git_dir / "remotes" / "old").write_text("URL: https://u:tokD-remotes@example.com/x.git\n")
        (git_dir / "secret.inc").write_text('[remote "inc"]\n\turl = https://u:tokB-included@example.com/z\n')
        (git_dir / "git-credentials").write_text("https://u:tokC-credstore@example.com\n")
        (git_dir / "store2").write_text("https://u:tokE-credstore@example.com\n")
        tree, prefix = (git_dir, "") if git_dir.name == "backup.git" else (git_dir.parent, ".git/")
        git(tree, "config", "include.path", "secret.inc")
        git(tree, "config", "credential.helper", f"store --file={prefix}git-credentials")
        git(tree, "config", "--add", "credential.helper", f"store --file {prefix}store2")
    output, _ = sh("for d in .git vendor/lib/.git backup.git; do for f in branches/bb remotes/old secret.inc git-credentials "
                   "store2; do base64 -w0 $d/$f; echo; done; done; git status --short; echo end")   # past the mask
    decoded = [base64.b64decode(line, validate=True) for line in output.splitlines()
               if line and len(line) % 4 == 0 and set(line) <= set(string.ascii_letters + string.digits + "+/=")]
    assert "end" in output and not any(b"tok" in text for text in decoded), (output, decoded)


def test_the_check_at_exit_survives_a_deep_chain_a_task_planted(box, notices, monkeypatch):
    """rt22 row 63: KeSi's check at exit died with a RecursionError traceback, the plant left in place."""
    monkeypatch.setitem(BACKGROUND_PLANTS, "deep", BACKGROUND_PLANTS["a new repository"] + " && " +
                        DEEP_CHAIN.format("src/.git/hooks/deep"))
    plant_in_the_background(box, "deep").proc.wait(timeout=30)
    kesi.stop_background_tasks()                   # as at KeSi's exit
    assert "src/.git/config: core.fsmonitor" in notices.getvalue(), notices.getvalue()
    later = used_later(box)
    assert not pwned(box), later


def test_a_full_disk_leaves_no_plant_in_a_known_config(small_disk, monkeypatch):
    """A put-back in a known place on a full disk: the planted file goes first (no room needed); when the person's
    larger one cannot be written back, they are warned, and the next check writes it back."""
    root = small_disk
    with (root / ".git" / "config").open("a") as config:
        config.write("# the person's notes\n" * 1000)                # 20 KB: more than the plant frees
    mine = (root / ".git" / "config").read_text()
    monkeypatch.setattr(kesi, "SANDBOX_DISABLED", True)          # the check after the command is all there is
    output, _ = sh("printf '[core]\\n\\tfsmonitor = touch PWNED\\n' > .git/config && fallocate -l "
                   "$(df --output=avail -B1 . | tail -1) fill; dd if=/dev/zero of=fill2 bs=4k 2>/dev/null; "
                   "echo planted")
    assert "planted" in output and "WARNING" in output and ".git/config" in output, output
    subprocess.run(["rm", "-f", str(root / "fill"), str(root / "fill2")], check=True)
    later = git_everywhere(root)
    assert not pwned(root), (output, later)
    output, _ = sh("echo next")
    assert (root / ".git" / "config").read_text() == mine, output


# rt38b B5, B20-B21: a lease (a task's, here this test's) fails KeSi's non-blocking read of a control file with EAGAIN;
# that read was kept as the bytes "(not a regular file)" and later written back over the person's own hook.
def test_a_control_file_kesi_cannot_read_is_never_written_back_as_a_placeholder(box):
    make_repo(box)
    target = box / ".git/hooks/pre-commit"        # one git itself does not open meanwhile (it would wait out the lease)
    target.write_text("#!/bin/sh\necho the person's own\n")
    target.chmod(0o755)
    content = target.read_bytes()
    lease = os.open(target, os.O_RDONLY)
    try:
        fcntl.fcntl(lease, 10, signal.SIGURG)                         # F_SETSIG: its break notice, ignored here
        fcntl.fcntl(lease, 1024, fcntl.F_WRLCK)                       # F_SETLEASE: KeSi's open now gets EAGAIN
        _, before = kesi.git_state_before()
    finally:
        fcntl.fcntl(lease, 1024, fcntl.F_UNLCK)
        os.close(lease)
    notice = kesi.check_git_control(before)
    assert target.read_bytes() == content, (notice, target.read_bytes())
    assert "not a regular file" not in notice, notice
