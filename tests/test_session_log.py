"""The session file is a log: appended to, never rewritten. Compaction and a
rolled-back refusal add a restart marker; resume loads the journal after the
last marker while the full transcript stays on disk."""
import json

import kesi
from checklib import capture_ui
from mock_api import reply, tool_call


def lines_of(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_each_turn_appends_and_never_rewrites(ws, mock_client):
    mock, client = mock_client(["one", "two", "three"])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "first")
    path = kesi.SESSION_FILE
    first_bytes, inode = path.read_bytes(), path.stat().st_ino
    kesi.run_turn(client, history, "second")
    kesi.run_turn(client, history, "third")
    assert path.read_bytes().startswith(first_bytes) and path.stat().st_ino == inode
    assert len(lines_of(path)) == 1 + 6
    assert kesi.load_session(path) == history


def test_compaction_keeps_the_transcript_and_resume_loads_the_summary(ws, mock_client):
    mock, client = mock_client(["one", "two", "SUMMARY.", "after"])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "first question, marker-7f3a")
    kesi.run_turn(client, history, "second question")
    path = kesi.SESSION_FILE
    before = path.read_bytes()
    kesi.handle_slash("/compact", client, history)
    kesi.run_turn(client, history, "third question")
    assert path.read_bytes().startswith(before) and b"marker-7f3a" in path.read_bytes()
    assert sum(kesi.RESTART in line for line in lines_of(path)) == 1
    resumed = []
    assert kesi.resume_session(path, resumed)
    assert resumed == history and "SUMMARY." in resumed[0]["content"]
    assert [kesi.text_of(m["content"]) for m in resumed][-2:] == ["third question", "after"]


def test_a_rolled_back_refusal_is_gone_after_resume(ws, mock_client):
    mock, client = mock_client(["Hi.", reply("I can't help with that.", stop_reason="refusal"), "Sure."])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "hello")
    kesi.run_turn(client, history, "the refused one")
    kesi.run_turn(client, history, "something else")
    resumed = kesi.load_session(kesi.SESSION_FILE)
    assert [kesi.text_of(m["content"]) for m in resumed] == ["hello", "Hi.", "something else", "Sure."]
    assert resumed == history


def test_a_resumed_session_that_ended_mid_tool_is_sealed_on_disk_too(ws, mock_client):
    mock, client = mock_client(["next answer"])
    folder = ws / ".kesi" / "sessions"
    folder.mkdir(parents=True)
    path = folder / "old.jsonl"
    use = {"type": "tool_use", "id": "toolu_x", "name": "list_files", "input": {}}
    path.write_text("\n".join(json.dumps(line) for line in [
        {"kesi_session": 1, "title": "old"}, {"role": "user", "content": "list"},
        {"role": "assistant", "content": [use]}]) + "\n")
    capture_ui()
    history = []
    assert kesi.resume_session(path, history)
    kesi.run_turn(client, history, "go on")
    assert mock.requests[-1]["status"] == 200
    assert kesi.read_session(path) == history           # the sealing result was written as well
    assert history[2]["content"][0]["content"] == kesi.STATE_UNKNOWN


def test_reset_starts_a_new_file(ws, mock_client):
    mock, client = mock_client(["one", "two"])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "first")
    first = kesi.SESSION_FILE
    kesi.handle_slash("/reset", client, history)
    kesi.run_turn(client, history, "second")
    assert kesi.SESSION_FILE != first and len(lines_of(first)) == 3 and len(lines_of(kesi.SESSION_FILE)) == 3


def test_tool_rounds_are_appended_in_order(ws, mock_client):
    (ws / "a.txt").write_text("alpha\n")
    mock, client = mock_client([reply("Reading.", tool_call("read_file", {"file_path": "a.txt"})), "It says alpha."])
    capture_ui()
    history = []
    kesi.run_turn(client, history, "what is in a.txt?")
    assert kesi.load_session(kesi.SESSION_FILE) == history and len(history) == 4
