"""The audit trail: every command, with who allowed or refused it, its start,
duration, exit code and clipped output, appended to .kesi/audit.jsonl through
the .kesi descriptor; it outlives compaction and /reset, /log shows its end,
and neither a planted link nor a sandboxed command can redirect or rewrite it.
"""
import io
import json
import os
import shutil
from pathlib import Path

import pytest

import kesi
from checklib import sandbox_forced
from mock_api import reply, tool_call
from checklib import ScriptedUser


@pytest.fixture
def notices(monkeypatch):
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    return kesi.UI


def audit(ws: Path) -> list[dict]:
    return [json.loads(line) for line in (ws / ".kesi" / "audit.jsonl").read_text().splitlines()]


def use(ws: Path, *commands: str) -> None:
    blocks = [{"type": "tool_use", "id": f"t{i}", "name": "run_command", "input": {"command": c}}
              for i, c in enumerate(commands)]
    kesi.run_tools(blocks)


def test_each_command_is_logged_with_who_decided(ws, notices, monkeypatch, tmp_path_factory):
    config = tmp_path_factory.mktemp("config")
    (config / "kesi").mkdir()
    (config / "kesi" / "settings.json").write_text(json.dumps({"permissions": {"allow": ["Bash(touch ruled.txt)"]}}))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.setattr(kesi, "ask_user", ScriptedUser("y", "n", "a", "y"))
    use(ws, "echo one", "touch asked.txt", "touch refused.txt", "touch ruled.txt", "sudo ls",
        "touch session.txt", "touch session.txt", "exit 3")
    kesi.PERMISSION_MODE = "bypassPermissions"
    use(ws, "touch bypassed.txt")
    entries = audit(ws)
    assert [(e["command"], e["decision"]) for e in entries] == [
        ("echo one", "allowed as read-only (classifier)"),
        ("touch asked.txt", "allowed by the person (once)"),
        ("touch refused.txt", "refused by the person" if kesi.can_ask() else "refused: nobody to ask"),
        ("touch ruled.txt", "allowed by rule Bash(touch ruled.txt) (user settings)"),
        ("sudo ls", "refused by a safety rule: sudo would run with superuser rights"),
        ("touch session.txt", "allowed by the person (saved Bash(touch session.txt:*))"),
        ("touch session.txt", "allowed by rule Bash(touch session.txt:*) (user settings, this project)"),
        ("exit 3", "allowed by the person (once)"),
        ("touch bypassed.txt", "allowed by mode bypassPermissions"),
    ], entries
    ran = [e for e in entries if e["decision"].startswith("allowed")]
    assert [e["exit_code"] for e in ran] == [0, 0, 0, 0, 0, 3, 0]
    assert all(e["seconds"] >= 0 and e["started"] and e["sandbox"] for e in ran)
    assert entries[0]["output"] == "one\n(exit code 0)"
    assert "exit_code" not in entries[2] and not (ws / "refused.txt").exists()


def test_output_is_clipped_and_masked_in_the_log(ws, notices):
    with sandbox_forced(None):
        kesi.run_command("python3 -c \"print('x' * 50000); print('token ghp_' + 'a' * 36)\"")
    (entry,) = audit(ws)
    assert len(entry["output"]) < kesi.AUDIT_OUTPUT_CHARS + 100 and "(... clipped ...)" in entry["output"]
    assert "[masked: github token]" in entry["output"] and "ghp_aaaa" not in entry["output"]
    assert entry["decision"].startswith("not checked")     # called directly, not through the loop


def test_the_log_outlives_compaction_and_reset_and_slash_log_shows_it(ws, notices, mock_client):
    mock, client = mock_client([reply(tool_call("run_command", {"command": "echo audit-canary"})), reply("done"),
                                reply("Summary: we echoed a canary.")])
    history = []
    kesi.run_turn(client, history, "echo something")
    kesi.handle_slash("/compact", client, history)
    assert "audit-canary" not in json.dumps(history)        # gone from the journal...
    kesi.handle_slash("/reset", client, history)
    kesi.handle_slash("/log", client, history)
    shown = notices.getvalue()
    assert "echo audit-canary" in shown and "allowed as read-only (classifier); exit 0" in shown, shown
    kesi.handle_slash("/log x", client, history)
    assert "N is a whole number" in notices.getvalue()


def test_background_tasks_are_logged_when_started_and_stopped(ws, notices):
    kesi.PERMISSION_MODE = "bypassPermissions"
    with sandbox_forced(None):
        assert kesi.check_permission("run_command", {"command": "sleep 30.25", "run_in_background": True})[0]
        try:
            kesi.run_command("sleep 30.25", run_in_background=True)
            kesi.background_stop(1)
        finally:
            kesi.stop_background_tasks()
            kesi.BACKGROUND_TASKS.clear()
    start, end = audit(ws)
    assert start["background_task"] == end["background_task"] == 1 and start["exit_code"] is None
    assert start["decision"] == "allowed by mode bypassPermissions" and start["command"] == "sleep 30.25"
    assert end["decision"] == "stopped by the model" and end["exit_code"] == -15


def test_a_planted_link_never_redirects_the_log(ws, notices, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "victim.txt"
    outside.write_text("untouched\n")
    (ws / ".kesi").mkdir()
    (ws / ".kesi" / "audit.jsonl").symlink_to(outside)
    with sandbox_forced(None):
        output, failed = kesi.run_command("echo still-runs")
    assert not failed and output.startswith("still-runs")
    assert outside.read_text() == "untouched\n" and "audit log not written" in notices.getvalue()
    (ws / ".kesi" / "audit.jsonl").unlink()
    shutil.rmtree(ws / ".kesi")
    (ws / ".kesi").symlink_to(outside.parent, target_is_directory=True)
    with sandbox_forced(None):
        kesi.run_command("echo again")
    assert sorted(os.listdir(outside.parent)) == ["victim.txt"]


def test_a_sandboxed_command_can_neither_read_nor_rewrite_the_log(ws, notices):
    if kesi.sandbox_kind() != "bubblewrap":
        pytest.skip("no usable bubblewrap here")
    output, _ = kesi.run_command("cat .kesi/audit.jsonl; echo first-canary")    # hidden from the first command too
    assert "Permission denied" in output
    output, failed = kesi.run_command("cat .kesi/audit.jsonl; grep -r first-canary .kesi; "
                                      "echo forged >> .kesi/audit.jsonl; : > .kesi/audit.jsonl")
    blocked = [line for line in output.splitlines() if line.endswith(("Permission denied", "Read-only file system"))]
    assert failed and len(blocked) == 4 and "first-canary" not in output, output
    assert audit(ws)[0]["command"].endswith("echo first-canary") and len(audit(ws)) == 2
    assert "forged\n" not in (ws / ".kesi" / "audit.jsonl").read_text().splitlines()


def test_a_fifo_in_place_of_the_log_does_not_hang_kesi(ws, notices):
    (ws / ".kesi").mkdir()
    os.mkfifo(ws / ".kesi" / "audit.jsonl")
    with sandbox_forced(None):
        output, failed = kesi.run_command("echo fine")
    assert not failed and output.startswith("fine") and "audit log not written" in notices.getvalue()


def test_sessions_and_prompt_history_are_hidden_from_commands_too(ws, notices):
    if kesi.sandbox_kind() != "bubblewrap":
        pytest.skip("no usable bubblewrap here")
    kesi.save_session([{"role": "user", "content": "session-canary"}])
    kesi.write_kesi_file((), "prompt-history", b"history-canary\n")
    output, _ = kesi.run_command("grep -r canary .kesi; ls .kesi/sessions; echo end")
    assert "session-canary" not in output and "history-canary" not in output and "end" in output, output
    assert output.count("Permission denied") >= 2, output
