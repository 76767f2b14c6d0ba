"""Check-then-open races (issue 10, class 3), with a real concurrent swapper.

A process a command left running swaps a folder of the workspace (and a
file in it) with a symlink to the home folder, over and over, while the file
tools are called in a loop on paths through that folder. Every tool must
either work inside the jail or refuse: the canaries outside are never read,
never written, and nothing new appears next to them.
"""
import ctypes
import os
import subprocess
import sys
import time
import uuid

import pytest

import kesi

SWAP_SECONDS = 2.5          # tools are called in a loop for this long per variant
SWAPPER_LIMIT = 20          # the swapper stops by itself after this, whatever happens

SWAPPER = r"""
import ctypes, os, sys, time
mode, ws, outside, stop, limit = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
os.chdir(ws)
libc = ctypes.CDLL(None, use_errno=True)
RENAME_EXCHANGE, AT_FDCWD = 2, -100

def exchange(a, b):
    libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)

def flip(name, aside, link_to):
    # the plain-rename variant: move the real thing aside, a symlink in its place, and back
    try:
        os.rename(name, aside)
        os.symlink(link_to, name)
        os.unlink(name)
        os.rename(aside, name)
    except OSError:
        pass

swaps, deadline = 0, time.monotonic() + limit
print("ready", flush=True)
while not os.path.exists(stop) and time.monotonic() < deadline:
    # Each round swaps the folder, then the file inside it (which only works
    # while d is the real folder: outside there is no note-link to exchange with).
    if mode == "exchange":
        exchange("d", "d-link")              # the folder <-> a link to the home folder
        exchange("d/note.txt", "d/note-link")  # a file <-> a link to the canary
    else:
        flip("d", "d-aside", outside)
        flip("d/note.txt", "d/note-aside", os.path.join(outside, "note.txt"))
    swaps += 1
print(swaps, flush=True)
"""


def has_renameat2() -> bool:
    return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "renameat2")


@pytest.fixture
def arena(ws, tmp_path_factory):
    """The workspace with d/ (and d/note.txt) next to links of the same shape
    that lead outside, and an outside folder full of canaries."""
    marker = f"CANARY-{uuid.uuid4().hex}"
    outside = tmp_path_factory.mktemp("home")
    (outside / "note.txt").write_text(f"{marker} secret\n")
    (outside / "only-outside.txt").write_text(f"{marker} listed\n")
    (outside / "sub").mkdir()
    (outside / "sub" / "deep.txt").write_text(f"{marker} deep\n")
    (ws / "d" / "sub").mkdir(parents=True)
    (ws / "d" / "note.txt").write_text("inside note\n")
    (ws / "d" / "sub" / "deep.txt").write_text("inside deep\n")
    (ws / "d-link").symlink_to(outside, target_is_directory=True)
    (ws / "d" / "note-link").symlink_to(outside / "note.txt")
    before = snapshot(outside)
    yield ws, outside, marker
    assert snapshot(outside) == before, "something outside the jail was written"


def snapshot(folder):
    return sorted((p.relative_to(folder).as_posix(), p.read_bytes(), p.stat().st_mtime_ns)
                  for p in folder.rglob("*") if p.is_file())


def tool_calls(i: int):
    """One round of every file tool on paths through the swapped folder."""
    yield "read_file", kesi.read_file("d/note.txt")
    yield "read_file deep", kesi.read_file("d/sub/deep.txt")
    yield "grep folder", kesi.grep("CANARY|inside", path="d/sub")
    yield "grep file", kesi.grep("CANARY|inside", path="d/note.txt")
    yield "list_files", kesi.list_files("d")
    yield "glob", kesi.glob_files("d/*")
    yield "glob deep", kesi.glob_files("d/**/*.txt")
    yield "edit_file", kesi.edit_file("d/sub/deep.txt", *(("deep", "deep!") if i % 2 else ("deep!", "deep")))
    kesi.read_file("d/note.txt")          # may license the overwrite below, if it read the inside
    yield "write_file overwrite", kesi.write_file("d/note.txt", "inside note\n" if i % 2 else "inside note!\n")
    yield "write_file create", kesi.write_file(f"d/sub/new-{i}.txt", "new\n")
    yield "write_file create deep", kesi.write_file(f"d/made-{i}/x.txt", "new\n")
    yield "memory file", (kesi.read_memory_file("d/note.txt") or "", False)


def run_race(arena, mode: str) -> dict:
    ws, outside, marker = arena
    stop = ws.parent / f"stop-{uuid.uuid4().hex}"
    swapper = subprocess.Popen([sys.executable, "-c", SWAPPER, mode, str(ws), str(outside), str(stop),
                                str(SWAPPER_LIMIT)], stdout=subprocess.PIPE, text=True)
    counts = {"attempts": 0, "worked": 0, "refused": 0, "escapes": 0}
    try:
        assert swapper.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + SWAP_SECONDS
        i = 0
        while time.monotonic() < deadline:
            for name, (output, is_error) in tool_calls(i):
                counts["attempts"] += 1
                counts["refused" if is_error else "worked"] += 1
                if marker in output or "only-outside" in output:
                    counts["escapes"] += 1
                    print(f"ESCAPE via {name}: {output[:200]!r}")
            i += 1
    finally:
        stop.touch()
        out, _ = swapper.communicate(timeout=SWAPPER_LIMIT + 10)
    counts["swaps"] = int(out.split()[-1])
    return counts


@pytest.mark.skipif(not has_renameat2(), reason="renameat2(RENAME_EXCHANGE) needs Linux")
def test_no_tool_escapes_a_rename_exchange_swapper(arena):
    counts = run_race(arena, "exchange")
    print(counts)
    assert counts["swaps"] > 0 and counts["attempts"] > 0
    assert counts["escapes"] == 0, counts


def test_no_tool_escapes_a_rename_loop_swapper(arena):
    counts = run_race(arena, "rename")
    print(counts)
    assert counts["swaps"] > 0 and counts["attempts"] > 0
    assert counts["escapes"] == 0, counts


def test_the_tools_still_work_once_the_swapping_stops(arena):
    """The arena is usable: the zero above is not because every call failed."""
    ws, outside, marker = arena
    assert kesi.read_file("d/note.txt") == ("     1\tinside note", False)
    assert kesi.grep("inside", path="d/sub") == ("d/sub/deep.txt:1:inside deep", False)
    assert kesi.grep("inside", path="d/note.txt") == ("d/note.txt:1:inside note", False)
    assert kesi.list_files("d") == ("note.txt\nsub/", False)      # note-link leads outside
    assert kesi.edit_file("d/sub/deep.txt", "deep", "deeper")[1] is False
    assert kesi.write_file("d/sub/new.txt", "x\n")[1] is False
    # The links themselves lead outside: every tool refuses them.
    for output, is_error in (kesi.read_file("d-link/note.txt"), kesi.read_file("d/note-link"),
                             kesi.grep("CANARY", path="d-link"), kesi.list_files("d-link"),
                             kesi.edit_file("d/note-link", "secret", "x"),
                             kesi.write_file("d-link/new.txt", "x\n")):
        assert is_error and marker not in output
