"""Git dirs under any name (rt22f LEAK 7): the file tools know a git dir by what it holds, not by the name .git.

The popular worktree layout keeps the repository in `.bare/` with a `.git` file `gitdir: ./.bare`; a nested
repository's git dir can be renamed; a bare repository can sit anywhere. Their configs hold token URLs and
settings git runs (core.fsmonitor), so no file tool may read, edit, write, list or search them; and the sandbox
keeps what the hooks of a `.git`-file repository link to read-only, as it does for a `.git` folder.
"""
import os
import subprocess
import uuid

import pytest

import kesi

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
GIT_DIRS = [".bare", "vendor/lib/gitdir", "deps/mirror", "admin"]   # the layout's, renamed, bare, a worktree's


def git(cwd, *args):
    done = subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def layout(ws):
    """ws as `git clone --bare URL .bare; echo 'gitdir: ./.bare' > .git` leaves it, plus two more git dirs."""
    marker = f"TOKEN{uuid.uuid4().hex}"
    git(ws, "init", "-q", "--bare", ".bare")
    (ws / ".git").write_text("gitdir: ./.bare\n")
    git(ws, "config", "--file", ".bare/config", "core.bare", "false")
    git(ws, "config", "--file", ".bare/config", "remote.origin.url", f"https://oauth2:{marker}@git.example.com/a.git")
    (ws / "a.txt").write_text("visible text\n")
    git(ws, "add", "a.txt")
    git(ws, "commit", "-qm", "first")
    (ws / "vendor" / "lib").mkdir(parents=True)
    git(ws / "vendor" / "lib", "init", "-q")
    git(ws / "vendor" / "lib", "config", "remote.origin.url", f"https://oauth2:{marker}@nested.example.com/l.git")
    (ws / "vendor" / "lib" / ".git").rename(ws / "vendor" / "lib" / "gitdir")
    git(ws, "init", "-q", "--bare", "deps/mirror")
    git(ws / "deps" / "mirror", "config", "remote.origin.url", f"https://oauth2:{marker}@mirror.example.com/m.git")
    (ws / "admin").mkdir()                                       # a worktree's git dir: HEAD, commondir, gitdir
    for name, text in {"HEAD": "ref: refs/heads/x\n", "commondir": "../.bare\n", "gitdir": "/elsewhere/.git\n",
                       "config": f"[core]\n\tsshCommand = {marker}\n"}.items():
        (ws / "admin" / name).write_text(text)
    (ws / "docs" / "refs").mkdir(parents=True)                   # a HEAD file and refs/ alone: no git dir
    (ws / "docs" / "HEAD").write_text("about HEAD\n")
    (ws / "gitlink").symlink_to(".bare")
    return ws, marker


@pytest.mark.parametrize("folder", GIT_DIRS + ["gitlink"])
def test_read_file_refuses_the_config_of_a_git_dir_under_any_name(layout, folder):
    ws, marker = layout
    output, is_error = kesi.read_file(f"{folder}/config")
    assert is_error and marker not in output and "git directory" in output and "git commands" in output, output


@pytest.mark.parametrize("folder", GIT_DIRS)
def test_edit_and_write_file_refuse_a_git_dir_under_any_name(layout, folder):
    ws, _ = layout
    config = (ws / folder / "config").read_bytes()
    edited = kesi.edit_file(f"{folder}/config", "[core]", "[core]\n\tfsmonitor = ./fsm.sh")
    written = kesi.write_file(f"{folder}/hooks/pre-commit", "#!/bin/sh\ntouch PWNED\n")
    deeper = kesi.write_file(f"{folder}/new/folder/file", "x\n")
    for output, is_error in (edited, written, deeper):
        assert is_error and "git directory" in output, output
    assert (ws / folder / "config").read_bytes() == config
    assert not (ws / folder / "hooks" / "pre-commit").exists() and not (ws / folder / "new").exists()


def test_listing_and_searching_tools_skip_git_dirs_under_any_name(layout):
    ws, marker = layout
    assert kesi.list_files(".") == ("a.txt\ndeps/\ndocs/\nvendor/", False)
    assert kesi.list_files("vendor/lib") == ("(this directory has no entries that can be listed)", False)
    for folder in GIT_DIRS:
        output, is_error = kesi.list_files(folder)
        assert is_error and "git directory" in output, output
        output, is_error = kesi.grep("oauth2", folder)
        assert is_error and "git directory" in output, output
    assert kesi.grep(marker) == (f"No matches for {marker}.", False)
    assert kesi.grep("oauth2", "vendor") == ("No matches for oauth2.", False)
    found, _ = kesi.glob_files("**/*")
    assert sorted(found.splitlines()) == ["a.txt", "deps/", "docs/", "docs/HEAD", "docs/refs/", "vendor/",
                                          "vendor/lib/"], found
    assert kesi.glob_files(".bare/*") == ("No accessible files match .bare/*.", False)
    assert kesi.grep("visible") == ("a.txt:1:visible text", False)          # the project itself stays in view
    assert kesi.read_file("docs/HEAD")[0].endswith("about HEAD")


def test_hook_scripts_linked_from_a_git_file_repository_are_read_only_to_commands(box):
    """Variant c: `.bare/hooks/pre-commit` links to scripts/hook.sh, which git runs on the person's next commit."""
    git(box, "init", "-q", "--bare", ".bare")
    (box / ".git").write_text("gitdir: ./.bare\n")
    git(box, "config", "--file", ".bare/config", "core.bare", "false")
    (box / "scripts").mkdir()
    (box / "scripts" / "hook.sh").write_text("#!/bin/sh\ntrue\n")
    (box / "scripts" / "hook.sh").chmod(0o755)
    (box / ".bare" / "hooks" / "pre-commit").symlink_to("../../scripts/hook.sh")
    (box / "a.txt").write_text("a\n")
    git(box, "add", "a.txt")
    git(box, "commit", "-qm", "first")
    output, failed = kesi.run_command("echo 'touch PWNED' >> scripts/hook.sh", timeout=30)
    assert failed and "Read-only file system" in output, output
    assert (box / "scripts" / "hook.sh").read_text() == "#!/bin/sh\ntrue\n"


def test_the_file_tools_never_turn_a_folder_into_a_git_dir(ws):
    """rt22p: config, HEAD and objects/ written first, then refs/ made src a git dir whose planted core.fsmonitor
    the person's `git status` ran; no command ran, so no check after one saw it."""
    for path in ("src/config", "src/HEAD", "src/objects/info/keep"):
        assert not kesi.write_file(path, "x\n")[1], path
    for path in ("src/refs/heads/keep", "src/refs", "src/commondir", "lib/gitdir"):
        output, is_error = kesi.write_file(path, "x\n")
        assert is_error and "git directory" in output and "git commands" not in output, output
    assert not (ws / "src" / "refs").exists() and not kesi.is_git_dir(ws / "src")
    assert not (ws / "lib" / "gitdir").exists()



def test_a_repository_gone_before_it_is_disarmed_keeps_no_descriptor_open(ws):
    """Found by trim T3: the folder above was opened, the git dir was gone, and the descriptor was never closed."""
    (ws / "sub").mkdir()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        assert kesi.disarm_repository("sub/.git") == []
    assert len(os.listdir("/proc/self/fd")) <= before + 2
