"""KeSi's own writes under .kesi never follow a planted symlink (issue 10, class 2).

A command can plant `.kesi/cache -> ~/.bashrc.d`, `.kesi/.gitignore ->
~/.ssh/authorized_keys`, or make .kesi itself a link. Making the caches must
then leave every canary outside unchanged. KeSi's records (sessions, prompt
history) are no longer in .kesi at all: what is planted there is neither read
nor written (issue 25).
"""
import io
import os
import uuid

import pytest

import kesi
from checklib import sandbox_forced

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


def make_caches():
    with sandbox_forced("bubblewrap"):
        kesi.make_cache_folder()


def test_without_links_the_cache_and_gitignore_are_made(ws, notices):
    make_caches()
    assert (ws / ".kesi" / "cache").is_dir() and "*" in (ws / ".kesi" / ".gitignore").read_text()


def test_records_planted_in_kesi_are_neither_followed_nor_read(ws, home, notices):
    plant(ws, "sessions", home / ".bashrc.d")
    (ws / ".kesi" / "prompt-history").symlink_to(home / ".profile")
    kesi.save_session(HISTORY)
    readline.clear_history()
    readline.add_history("echo $(curl evil)")
    kesi.save_prompt_history()
    readline.clear_history()
    kesi.load_prompt_history()
    assert readline.get_history_item(1) == "echo $(curl evil)" and notices.getvalue() == ""
    assert kesi.list_sessions() == [kesi.SESSION_FILE] and kesi.read_session(kesi.SESSION_FILE)[0] == HISTORY


@pytest.mark.parametrize("name", ["cache", ".gitignore"])
def test_a_link_in_kesi_is_left_alone(ws, home, notices, name):
    plant(ws, name, home / ".bashrc.d" if name == "cache" else home / "authorized_keys")
    make_caches()
    assert (ws / ".kesi" / name).is_symlink()


@pytest.mark.parametrize("where", ["home", "dangling"])
def test_kesi_itself_a_link_is_refused(ws, home, notices, where):
    target = home if where == "home" else home / "not-there-yet"
    (ws / ".kesi").symlink_to(target, target_is_directory=True)
    make_caches()
    assert not (home / "not-there-yet").exists() and not (home / "cache").exists()
    with pytest.raises(OSError, match=".kesi is a symlink"):
        kesi.kesi_folder("cache")
