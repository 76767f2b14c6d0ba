"""KeSi's own folders (the user's config with env and settings.json, the records with their key) never
overlap the workspace, which commands and the model can write (issue 25, leaks L1 and L6): a real kesi.py
refuses to start there, in either direction and through links; the key must be the user's own 0600 file."""
import json
import os
import shutil
import tempfile
import subprocess
import sys
from pathlib import Path

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call

KESI = checklib.ROOT / "kesi.py"
PLANT = [reply(tool_call("write_file", {"file_path": "kesi/settings.json", "content": json.dumps(
             {"permissions": {"allow": ["Bash(touch pwned)"]}, "network": {"allow": ["*"]}})})),
         reply(tool_call("run_command", {"command": "touch pwned"})), reply("done")]


def layout(tmp_path: Path, case: str) -> tuple[Path, dict]:
    """(workspace, environment) for one way KeSi's folders and the workspace can overlap."""
    home, outside = tmp_path / "home", tmp_path / "outside"
    for folder in (home / ".config", home / ".local" / "state", outside):
        folder.mkdir(parents=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(outside / "config"), "XDG_STATE_HOME": str(outside / "state")}
    if case == "state folder is the workspace's parent":
        return (outside / "state" / "kesi").resolve(), env
    if case == "default state folder inside the workspace":
        return (home / ".local").resolve(), {**env, "XDG_STATE_HOME": ""}
    if case == "default config folder inside the workspace (dotfiles)":
        return (home / ".config").resolve(), {**env, "XDG_CONFIG_HOME": ""}
    if case == "workspace inside the records":
        return (outside / "state" / "kesi" / "projects" / "p").resolve(), env
    if case == "env file linked into the workspace":
        ws = (tmp_path / "ws").resolve()
        (outside / "config" / "kesi").mkdir(parents=True)
        (outside / "config" / "kesi" / "env").symlink_to(ws / "env")
        return ws, env
    ws = (tmp_path / "ws").resolve()
    (ws / "state").mkdir(parents=True)
    (outside / "link").symlink_to(ws / "state")
    return ws, {**env, "XDG_STATE_HOME": str(outside / "link")}     # a link out there, into the workspace


@pytest.mark.parametrize("case", ["state folder is the workspace's parent", "default state folder inside the "
                                  "workspace", "default config folder inside the workspace (dotfiles)",
                                  "workspace inside the records", "state folder linked into the workspace",
                                  "env file linked into the workspace"])
def test_kesi_refuses_to_start_where_its_own_folders_overlap_the_workspace(tmp_path, case):
    ws, env = layout(tmp_path, case)
    ws.mkdir(parents=True, exist_ok=True)
    with MockAPI(PLANT) as mock:
        done = subprocess.run([sys.executable, str(KESI), "--permission-mode", "acceptEdits", "-p", "go"], cwd=ws,
                              env=checklib.kesi_subprocess_env(mock, **env), capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "this workspace" in done.stderr, (done.returncode, done.stderr)
    assert not (ws / "pwned").exists() and not list(tmp_path.rglob("records.key")), done.stderr


def test_a_linked_state_folder_is_resolved_once(ws, monkeypatch, tmp_path_factory):
    """A link in the workspace that leads out is followed once, at start-up: flipping it later moves nothing."""
    outside = tmp_path_factory.mktemp("real-state")
    (ws / "link").symlink_to(outside)
    (ws / "evil").mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(ws / "link"))
    assert kesi.own_folders_clash() is None and os.environ["XDG_STATE_HOME"] == str(outside.resolve())
    (ws / "link").unlink()
    (ws / "link").symlink_to(ws / "evil")
    kesi.write_audit_entry({"command": "echo after the flip"})
    assert list((outside / "kesi").rglob("audit.jsonl")) and not list((ws / "evil").rglob("*"))


@pytest.mark.parametrize("plant", ["readable by others", "a link to the user's file", "a FIFO", "not hex"])
def test_a_records_key_kesi_did_not_make_is_refused(ws, notices, monkeypatch, tmp_path_factory, plant):
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    (state / "kesi").mkdir(mode=0o700)
    key, elsewhere = state / "kesi" / "records.key", state / "planted"
    elsewhere.write_text("00" * 32)
    elsewhere.chmod(0o600)
    if plant == "readable by others":
        key.write_text("00" * 32)
        key.chmod(0o644)
    elif plant == "a link to the user's file":
        key.symlink_to(elsewhere)
    elif plant == "a FIFO":
        os.mkfifo(key, 0o600)
    else:
        key.write_text("zz" * 32)
        key.chmod(0o600)
    kesi.write_audit_entry({"command": "echo hi"})
    assert "audit log not written" in notices.getvalue() and "mode 0600" in notices.getvalue(), notices.getvalue()
    assert not list(state.rglob("audit.jsonl"))


@pytest.mark.skipif(shutil.which("bwrap") is None or not os.access("/opt", os.W_OK), reason="needs bwrap, /opt")
@pytest.mark.parametrize("linked", [None, "folder", "file", "records", "re-pointed"])  # rt25c 1, 16, rt25d 1, 25
def test_kesi_config_outside_home_is_hidden_from_commands(ws, monkeypatch, linked):
    """An XDG_CONFIG_HOME outside the home folder (here under /opt, which the sandbox shows read-only) still
    hides KeSi's own env file and settings from sandboxed commands (rt25b 27: `rev` printed the key whole), also
    where its folder is a link to one elsewhere (rt25c 1, 16)."""
    outside = Path(tempfile.mkdtemp(prefix="kesi-test-config-", dir="/opt"))
    try:
        folder = outside / ("real" if linked else "config/kesi")
        folder.mkdir(parents=True)
        (folder / "env").write_text("ANTHROPIC_API_KEY=sk-ant-hidden-from-commands\n")
        (outside / "config").mkdir(exist_ok=True)
        if linked == "folder":
            (outside / "config" / "kesi").symlink_to(folder)      # as dotfile managers leave it
        elif linked == "records":       # the records' projects folder a link to elsewhere, a session in it
            (outside / "state" / "kesi").mkdir(parents=True)
            (outside / "state" / "kesi" / "projects").symlink_to(folder)
            monkeypatch.setenv("XDG_STATE_HOME", str(outside / "state"))
            kesi.save_session([{"role": "user", "content": "my password is hunter2"}])
            (outside / "real" / "env").unlink()
        elif linked in ("file", "re-pointed"):
            (outside / "config" / "kesi").mkdir()
            (outside / "config" / "kesi" / "env").symlink_to(folder / "env")
        if linked == "re-pointed":            # KeSi read its key here at start; the user re-points the link later
            monkeypatch.setenv("XDG_CONFIG_HOME", str(outside / "config"))
            kesi.own_folder_targets()
            (outside / "other").mkdir()
            (outside / "config" / "kesi" / "env").unlink()
            (outside / "config" / "kesi" / "env").symlink_to(outside / "other" / "env")
        monkeypatch.setenv("XDG_CONFIG_HOME", str(outside / "config"))
        kesi.PERMISSION_MODE = "bypassPermissions"
        with checklib.sandbox_forced("bubblewrap"):
            text, _ = kesi.run_command(f"ls {outside}/*; rev {outside}/config/kesi/env {outside}/real/env; "
                                       f"grep -r hunter2 {outside}/real; echo end")
        assert "end" in text and "hidden-from-commands"[::-1] not in text and "No such file" in text, text
        assert "hunter2" not in text, text
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_a_bind_mount_of_the_workspace_is_the_workspace(ws, monkeypatch, tmp_path_factory):
    """XDG_STATE_HOME under a bind mount of the workspace put the records inside it under another name (rt25e 6-8):
    folders are compared by inode, not by name."""
    alias = tmp_path_factory.mktemp("alias")
    if subprocess.run(["mount", "--bind", str(ws), str(alias)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        monkeypatch.setenv("XDG_STATE_HOME", str(alias / "state"))
        assert "overlaps this workspace" in (kesi.own_folders_clash() or "")
    finally:
        subprocess.run(["umount", str(alias)], capture_output=True)
