"""KeSi's own writes under .kesi never follow a planted symlink (issue 10, class 2).

A command can plant `.kesi/prompt-history -> ~/.profile`, `.kesi/sessions ->
~/.bashrc.d`, `.kesi/.gitignore -> ~/.ssh/authorized_keys`, or make .kesi
itself a link. Saving a session or the prompt history must then leave every
canary outside unchanged, say so in one line, and lose nothing.
"""
import io
import os
import uuid

import pytest

import checklib
import kesi

readline = pytest.importorskip("readline")


@pytest.fixture
def home(tmp_path_factory):
    """A fake home folder full of canaries; checked unchanged after the test."""
    folder = tmp_path_factory.mktemp("home")
    marker = f"canary-{uuid.uuid4().hex}\n"
    for name in (".profile", "authorized_keys", ".bashrc.d/keep.sh"):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(marker)
    before = state(folder)
    yield folder
    assert state(folder) == before, "KeSi wrote outside the workspace"


def state(folder):
    return sorted((str(p.relative_to(folder)), p.read_bytes() if p.is_file() else None)
                  for p in folder.rglob("*"))


@pytest.fixture
def notices(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(kesi, "UI", out)
    return out


HISTORY = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]


def plant(ws, name, target):
    (ws / ".kesi").mkdir(exist_ok=True)
    (ws / ".kesi" / name).symlink_to(target)


def test_without_links_sessions_history_and_gitignore_are_written(ws, notices):
    kesi.save_session(HISTORY)
    readline.clear_history()
    readline.add_history("first prompt")
    kesi.save_prompt_history()
    assert notices.getvalue() == ""
    assert "*" in (ws / ".kesi" / ".gitignore").read_text()
    [session] = (ws / ".kesi" / "sessions").iterdir()
    assert kesi.load_session(session) == HISTORY
    readline.clear_history()
    kesi.load_prompt_history()
    assert readline.get_history_item(1) == "first prompt"


def test_a_sessions_link_is_refused_in_one_line_and_nothing_is_lost(ws, home, notices):
    plant(ws, "sessions", home / ".bashrc.d")
    kesi.save_session(HISTORY)
    lines = notices.getvalue().splitlines()
    assert len(lines) == 1 and "could not save the session" in lines[0] and "symlink" in lines[0]
    assert "Traceback" not in notices.getvalue()
    (ws / ".kesi" / "sessions").unlink()          # the user removes the link: the next save works
    kesi.save_session(HISTORY)
    [session] = (ws / ".kesi" / "sessions").iterdir()
    assert kesi.load_session(session) == HISTORY


def test_a_planted_session_file_link_is_not_followed_and_nothing_is_lost(ws, home, notices):
    (ws / ".kesi" / "sessions").mkdir(parents=True)
    planted = kesi.SESSION_FILE = ws / ".kesi" / "sessions" / "resumed.jsonl"
    before = (home / ".profile").read_bytes() if (home / ".profile").exists() else None
    planted.symlink_to(home / ".profile")
    kesi.save_session(HISTORY)
    after = (home / ".profile").read_bytes() if (home / ".profile").exists() else None
    assert before == after and planted.is_symlink()
    assert kesi.SESSION_FILE != planted and kesi.load_session(kesi.SESSION_FILE) == HISTORY


@pytest.mark.parametrize("target", [".profile", "authorized_keys"])
def test_a_prompt_history_link_is_never_written_through(ws, home, notices, target):
    plant(ws, "prompt-history", home / target)
    readline.clear_history()
    readline.add_history("echo $(curl evil)")
    kesi.save_prompt_history()
    assert not (ws / ".kesi" / "prompt-history").is_symlink()     # our own file took its place
    assert b"curl evil" in (ws / ".kesi" / "prompt-history").read_bytes()


def test_a_prompt_history_link_is_not_read_either(ws, home):
    plant(ws, "prompt-history", home / ".profile")
    readline.clear_history()
    kesi.load_prompt_history()
    assert readline.get_current_history_length() == 0


def test_a_gitignore_link_is_left_alone(ws, home, notices):
    plant(ws, ".gitignore", home / "authorized_keys")
    kesi.save_session(HISTORY)
    assert (ws / ".kesi" / ".gitignore").is_symlink()
    assert len(list((ws / ".kesi" / "sessions").iterdir())) == 1


@pytest.mark.parametrize("where", ["home", "dangling"])
def test_kesi_itself_a_link_is_refused(ws, home, notices, where):
    target = home if where == "home" else home / "not-there-yet"
    (ws / ".kesi").symlink_to(target, target_is_directory=True)
    kesi.save_session(HISTORY)
    readline.clear_history()
    readline.add_history("x")
    kesi.save_prompt_history()
    lines = notices.getvalue().splitlines()
    assert len(lines) == 2 and all(".kesi is a symlink" in line for line in lines), lines
    assert not (home / "not-there-yet").exists()


def test_a_link_in_a_parent_of_the_sessions_folder_is_refused(ws, notices, tmp_path_factory):
    """sessions is a real folder, but inside a linked .kesi: the planted link
    is found at whatever level it sits."""
    fake = tmp_path_factory.mktemp("fake-kesi")
    (fake / "sessions").mkdir()
    (ws / ".kesi").symlink_to(fake, target_is_directory=True)
    kesi.save_session(HISTORY)
    assert list((fake / "sessions").iterdir()) == [] and not (fake / ".gitignore").exists()
    assert "symlink" in notices.getvalue()


def test_the_sessions_folder_swapped_for_a_link_between_saves(ws, home, notices):
    kesi.save_session(HISTORY)
    sessions = ws / ".kesi" / "sessions"
    for f in sessions.iterdir():
        f.unlink()
    sessions.rmdir()
    sessions.symlink_to(home / ".bashrc.d", target_is_directory=True)
    kesi.save_session(HISTORY + [{"role": "user", "content": "more"}])
    assert "could not save the session" in notices.getvalue()
    checklib.fresh_state()
