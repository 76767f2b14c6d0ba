"""The read-only tools (read_file, list_files, glob, grep) against real files.

Every guard from the Day 06-08 digests is exercised here on a real folder:
symlink escapes (on every tool), '..', absolute paths, the ignore list
(.env, .env.*, .git, node_modules), FIFOs, directories, binary and non-UTF-8
files, CRLF, the offset/limit view and the caps. grep runs the real rg.
"""
import errno
import os
import shutil
import threading
import tracemalloc

import pytest

import kesi

SECRET = "TOP-SECRET-OUTSIDE"


# --- helpers -------------------------------------------------------------------

def write(root, rel, content="x\n"):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


@pytest.fixture
def outside(tmp_path_factory):
    """A folder outside the jail holding a secret file."""
    folder = tmp_path_factory.mktemp("outside").resolve()
    write(folder, "secret.txt", SECRET + "\n")
    return folder


@pytest.fixture
def escapes(ws, outside):
    """A jail with symlinks that lead out of it, plus one harmless file."""
    write(ws, "ok.txt", "fine\n")
    os.symlink(outside / "secret.txt", ws / "leak.txt")
    os.symlink(outside, ws / "outdir")
    return ws


def call_with_deadline(func, *args, seconds=5.0):
    """Run func in a thread; fail instead of hanging forever (the FIFO cases)."""
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("value", func(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"{func.__name__}{args} did not return: it blocked"
    return box["value"]


def assert_refused(result, *leaks):
    output, is_error = result
    assert is_error, output
    assert output.startswith("Error:"), output
    for leak in leaks:
        assert leak not in output


# --- read_file: the jail ----------------------------------------------------------

def test_read_file_returns_numbered_lines(ws):
    write(ws, "a.txt", "alpha\nbeta\n")
    assert kesi.read_file("a.txt") == ("     1\talpha\n     2\tbeta", False)


def test_read_file_accepts_an_absolute_path_inside_the_jail(ws):
    write(ws, "a.txt", "alpha\n")
    assert kesi.read_file(str(ws / "a.txt")) == ("     1\talpha", False)


@pytest.mark.parametrize("path", ["leak.txt", "outdir/secret.txt", "../outside/secret.txt", "/etc/passwd",
                                  "sub/../../x", "~/.bashrc", ""])
def test_read_file_refuses_paths_outside_the_jail(escapes, path):
    assert_refused(kesi.read_file(path), SECRET, "root:")


def test_read_file_refuses_dot_dot_to_a_real_outside_file(escapes, outside):
    rel = os.path.relpath(outside / "secret.txt", escapes)
    assert rel.startswith("..")
    assert_refused(kesi.read_file(rel), SECRET)


@pytest.mark.parametrize("path", [".env", ".env.local", ".env.example", "sub/.env", "sub/../.env",
                                  ".git/config", "node_modules/pkg/index.js", "env-link"])
def test_read_file_refuses_ignored_names(ws, path):
    for rel in (".env", ".env.local", ".env.example", "sub/.env", ".git/config", "node_modules/pkg/index.js"):
        write(ws, rel, "API_KEY=hidden-value\n")
    os.symlink(ws / ".env", ws / "env-link")     # the resolved name is what counts
    output, is_error = kesi.read_file(path)
    assert is_error and "off-limits" in output
    assert "hidden-value" not in output


def test_read_file_never_opens_a_fifo(ws):
    os.mkfifo(ws / "pipe")
    os.symlink(ws / "pipe", ws / "pipe-link")
    for name in ("pipe", "pipe-link"):
        output, is_error = call_with_deadline(kesi.read_file, name)
        assert is_error and "not a regular text file" in output


@pytest.mark.parametrize("path", [".", "sub", "sub/"])
def test_read_file_refuses_directories_without_leaking_the_absolute_path(ws, path):
    (ws / "sub").mkdir()
    output, is_error = kesi.read_file(path)
    assert is_error and "list_files" in output
    assert str(ws) not in output and "Errno" not in output


# --- read_file: content -----------------------------------------------------------

def test_read_file_refuses_binary_files(ws):
    write(ws, "blob.bin", b"PK\x03\x04\x00\x00binary")
    output, is_error = kesi.read_file("blob.bin")
    assert is_error and "binary" in output


def test_read_file_is_strict_utf8(ws):
    write(ws, "latin1.txt", "caf\xe9\n".encode("latin-1"))
    write(ws, "late.txt", b"good line\n" + b"bad \xff line\n")
    for name in ("latin1.txt", "late.txt"):
        output, is_error = kesi.read_file(name)
        assert is_error and "not UTF-8" in output, output


def test_read_file_decodes_characters_split_across_read_chunks(ws):
    # The reader pulls about 8 kB at a time; a 3-byte character straddles that edge.
    write(ws, "wide.txt", "a" * 8003 + "中文\nnext\n")
    output, is_error = kesi.read_file("wide.txt")
    assert not is_error
    assert "     2\tnext" in output


def test_read_file_shows_crlf_lines_and_says_so(ws):
    write(ws, "win.txt", b"x = 1\r\ny = 2\r\n")
    output, is_error = kesi.read_file("win.txt")
    assert not is_error
    assert output.startswith("     1\tx = 1\n     2\ty = 2\n")
    assert "\r" not in output.split("\n(")[0]
    assert "CRLF" in output


def test_read_file_of_an_empty_file(ws):
    write(ws, "empty.txt", "")
    output, is_error = kesi.read_file("empty.txt")
    assert not is_error and "empty" in output


# --- read_file: offset, limit and the caps -------------------------------------------

def test_offset_and_limit_return_a_numbered_partial_window(ws):
    write(ws, "ten.txt", "".join(f"line {n}\n" for n in range(1, 11)))
    output, is_error = kesi.read_file("ten.txt", offset=3, limit=2)
    assert not is_error
    lines = output.splitlines()
    assert lines[:2] == ["     3\tline 3", "     4\tline 4"]
    assert "PARTIAL" in output and "offset=5" in output
    assert "line 5" not in output


def test_reading_to_the_end_from_an_offset_is_still_partial(ws):
    write(ws, "ten.txt", "".join(f"line {n}\n" for n in range(1, 11)))
    output, _ = kesi.read_file("ten.txt", offset=9)
    assert output.splitlines()[:2] == ["     9\tline 9", "    10\tline 10"]
    assert "PARTIAL" in output          # it did not see lines 1-8


def test_offset_past_the_end(ws):
    write(ws, "two.txt", "a\nb\n")
    output, is_error = kesi.read_file("two.txt", offset=50)
    assert not is_error and "no lines at offset 50" in output


@pytest.mark.parametrize("offset, limit", [(0, None), (-1, None), (True, None), ("3", None), (1.5, None),
                                           (None, 0), (None, -5), (None, "10")])
def test_bad_offset_or_limit_is_an_error(ws, offset, limit):
    write(ws, "a.txt", "a\n")
    output, is_error = kesi.read_file("a.txt", offset=offset, limit=limit)
    assert is_error and ("offset" in output or "limit" in output)


def test_default_view_stops_at_max_read_lines(ws):
    total = kesi.MAX_READ_LINES + 50
    write(ws, "long.txt", "".join(f"{n}\n" for n in range(1, total + 1)))
    output, _ = kesi.read_file("long.txt")
    numbered = [line for line in output.splitlines() if "\t" in line]
    assert len(numbered) == kesi.MAX_READ_LINES
    assert f"offset={kesi.MAX_READ_LINES + 1}" in output


def test_a_file_of_exactly_the_limit_is_a_full_view(ws):
    write(ws, "exact.txt", "".join(f"{n}\n" for n in range(1, kesi.MAX_READ_LINES + 1)))
    write(ws, "no-newline.txt", "a\nb")
    output, _ = kesi.read_file("exact.txt")
    assert "PARTIAL" not in output and output.endswith(f"{kesi.MAX_READ_LINES}\t{kesi.MAX_READ_LINES}")
    assert kesi.read_file("no-newline.txt", limit=2) == ("     1\ta\n     2\tb", False)


def test_a_50_mb_file_gives_a_bounded_partial_view_without_loading_it(ws):
    row = "0123456789" * 9 + "012345678\n"             # 100-byte lines
    with open(ws / "huge.log", "w") as f:
        for _ in range(50):
            f.write(row * 10_000)                      # 50 x 1 MB
    assert (ws / "huge.log").stat().st_size == 50_000_000
    tracemalloc.start()
    try:
        output, is_error = kesi.read_file("huge.log")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert not is_error and "PARTIAL" in output
    assert len(output) <= kesi.MAX_READ_CHARS + 20_000
    assert peak < 5_000_000, f"read_file held {peak:,} bytes at once"


def test_a_far_offset_in_a_50_mb_file_stops_scanning(ws):
    line = b"y" * 999 + b"\n"
    with open(ws / "lines.txt", "wb") as f:
        for _ in range(50):
            f.write(line * 1000)                       # 50k lines of 1 kB
    output, is_error = kesi.read_file("lines.txt", offset=40_000)
    assert not is_error
    assert "scanning" in output and "no lines" in output


def test_a_1_mb_single_line_is_cut(ws):
    write(ws, "one-line.min.js", "z" * 1_000_000 + "\n")
    output, is_error = kesi.read_file("one-line.min.js")
    assert not is_error
    assert "[... line cut]" in output and "PARTIAL" in output
    assert len(output) < kesi.MAX_LINE_CHARS + 500


def test_output_cap_limits_many_long_lines(ws):
    write(ws, "wide.csv", ("w" * 1500 + "\n") * 500)
    output, _ = kesi.read_file("wide.csv")
    assert len(output) <= kesi.MAX_READ_CHARS + 2_000
    assert "output cap" in output and "PARTIAL" in output


# --- list_files ---------------------------------------------------------------------

def test_list_files_sorts_marks_folders_and_hides_ignored_names(ws):
    for rel in ("b.py", "a.txt", "src/main.py", ".env", ".env.example", ".git/HEAD",
                "node_modules/x/i.js", "__pycache__/m.pyc", ".venv/bin/python", ".kesi/sessions/s.jsonl"):
        write(ws, rel)
    os.symlink(ws / "a.txt", ws / "alias.txt")       # a link that stays inside is fine
    os.symlink(ws / ".env", ws / "settings")         # ...unless it resolves to a hidden name
    assert kesi.list_files() == ("a.txt\nalias.txt\nb.py\nsrc/", False)
    assert kesi.list_files("src") == ("main.py", False)


def test_list_files_drops_symlinks_that_escape(escapes):
    assert kesi.list_files() == ("ok.txt", False)


@pytest.mark.parametrize("path", ["..", "/etc", "outdir", "outdir/", "../outside", "sub/../.."])
def test_list_files_refuses_paths_outside_the_jail(escapes, path):
    assert_refused(kesi.list_files(path), SECRET, "secret.txt")


@pytest.mark.parametrize("path", [".git", "node_modules", "src/node_modules", "src/../.git"])
def test_list_files_refuses_ignored_folders(ws, path):
    write(ws, ".git/config")
    write(ws, "node_modules/a/index.js")
    write(ws, "src/node_modules/b/index.js")
    output, is_error = kesi.list_files(path)
    assert is_error and "off-limits" in output


def test_list_files_on_a_file_or_fifo(ws):
    write(ws, "a.txt")
    os.mkfifo(ws / "pipe")
    for name in ("a.txt", "pipe"):
        output, is_error = call_with_deadline(kesi.list_files, name)
        assert is_error and "not a directory" in output


def test_list_files_of_an_empty_folder(ws):
    (ws / "empty").mkdir()
    output, is_error = kesi.list_files("empty")
    assert not is_error and "no entries" in output


def test_list_files_caps_at_200_with_a_count(ws):
    for n in range(250):
        write(ws, f"f{n:03}.txt")
    output, is_error = kesi.list_files()
    lines = output.splitlines()
    assert not is_error
    assert lines[:kesi.MAX_LIST_FILES] == [f"f{n:03}.txt" for n in range(200)]
    assert len(lines) == kesi.MAX_LIST_FILES + 1 and "250" in lines[-1]


# --- glob ---------------------------------------------------------------------------

@pytest.mark.parametrize("pattern", ["..", "../*", "../**/*.txt", "sub/../../*", "~/*", "~root/*", "/etc/*",
                                     "C:\\Windows\\*", "C:x", "\\\\server\\share\\*", "..\\..\\etc\\*",
                                     "sub\\..\\..\\*"])
def test_glob_refuses_patterns_that_leave_the_jail(escapes, pattern):
    assert_refused(kesi.glob_files(pattern), SECRET, "secret.txt")


@pytest.mark.parametrize("pattern", ["", "   ", None, 7, ["*.py"], ".", "./"])
def test_glob_refuses_empty_or_meaningless_patterns(ws, pattern):
    output, is_error = kesi.glob_files(pattern)
    assert is_error and output.startswith("Error:")


def test_glob_double_dot_inside_a_name_is_legal(ws):
    write(ws, "version..txt")
    write(ws, "notes/v1..2.md")
    assert kesi.glob_files("version..txt") == ("version..txt", False)
    assert kesi.glob_files("**/*..*") == ("notes/v1..2.md\nversion..txt", False)


def test_glob_top_level_versus_any_depth(ws):
    for rel in ("a.py", "src/b.py", "src/deep/c.py", "src/readme.md"):
        write(ws, rel)
    assert kesi.glob_files("*.py") == ("a.py", False)
    assert kesi.glob_files("**/*.py") == ("a.py\nsrc/b.py\nsrc/deep/c.py", False)
    assert kesi.glob_files("src/*") == ("src/b.py\nsrc/deep/\nsrc/readme.md", False)


def test_glob_rechecks_every_hit(escapes):
    os.symlink(escapes / "ok.txt", escapes / "inside-link.txt")
    output, is_error = kesi.glob_files("**/*")
    assert not is_error
    assert output.splitlines() == ["inside-link.txt", "ok.txt"]
    assert kesi.glob_files("outdir/*")[0].startswith("No accessible files")
    assert kesi.glob_files("leak.txt")[0].startswith("No accessible files")


def test_glob_hides_ignored_names(ws):
    for rel in ("app.py", ".env", ".env.production", "sub/.env.local", ".git/hooks/pre-commit.py",
                "node_modules/lib/x.py", "pkg/node_modules/y.py", "__pycache__/app.py"):
        write(ws, rel)
    os.symlink(ws / ".env", ws / "settings.py")
    assert kesi.glob_files("**/*") == ("app.py\npkg/\nsub/", False)
    assert kesi.glob_files("**/*.py") == ("app.py", False)
    assert kesi.glob_files("**/.env*")[0].startswith("No accessible files")
    assert kesi.glob_files("node_modules/**")[0].startswith("No accessible files")


def test_glob_does_not_walk_into_ignored_folders(ws, monkeypatch):
    for n in range(3):
        write(ws, f"node_modules/pkg{n}/index.js")
        write(ws, f"src/.git/objects/o{n}")
    write(ws, "src/app.js")
    visited = []
    real_scandir = os.scandir

    def spying_scandir(path="."):       # glob lists folders through descriptors
        visited.append(os.readlink(f"/proc/self/fd/{path}") if isinstance(path, int) else os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spying_scandir)    # os.walk lists folders through it
    assert kesi.glob_files("**/*.js") == ("src/app.js", False)
    assert visited and not any("node_modules" in p or ".git" in p for p in visited), visited


def test_glob_caps_at_200_with_a_count(ws):
    for n in range(230):
        write(ws, f"data/r{n:03}.csv")
    output, is_error = kesi.glob_files("data/*.csv")
    lines = output.splitlines()
    assert not is_error
    assert len(lines) == kesi.MAX_LIST_FILES + 1
    assert lines[0] == "data/r000.csv" and lines[199] == "data/r199.csv"
    assert "230" in lines[-1]


# --- grep -----------------------------------------------------------------------------

needs_rg = pytest.mark.skipif(shutil.which("rg") is None, reason="ripgrep is not installed")


@needs_rg
def test_grep_reports_file_line_and_text(ws):
    write(ws, "app.py", "import os\ndef safe_path(p):\n    return p\n")
    write(ws, "sub/use.py", "safe_path('x')\n")
    output, is_error = kesi.grep("safe_path")
    assert not is_error
    assert sorted(output.splitlines()) == ["app.py:2:def safe_path(p):", "sub/use.py:1:safe_path('x')"]
    assert kesi.grep("safe_path", path="sub") == ("sub/use.py:1:safe_path('x')", False)
    assert kesi.grep("SAFE_PATH", path="sub/use.py", ignore_case=True) == ("sub/use.py:1:safe_path('x')", False)


@needs_rg
def test_grep_without_matches_is_not_an_error(ws):
    write(ws, "a.txt", "hello\n")
    assert kesi.grep("absent-word") == ("No matches for absent-word.", False)


@needs_rg
def test_grep_runs_no_shell(ws):
    write(ws, "a.txt", f"user {os.environ.get('USER', 'root')} root\n")
    output, is_error = kesi.grep("$(whoami)")
    assert (output, is_error) == ("No matches for $(whoami).", False)
    kesi.grep("x; touch pwned")
    kesi.grep("`touch pwned2`")
    assert not (ws / "pwned").exists() and not (ws / "pwned2").exists()


@needs_rg
@pytest.mark.parametrize("pattern", ["--files", "--hidden", "-e", "--pre=sh"])
def test_grep_patterns_that_look_like_options_stay_patterns(ws, pattern):
    write(ws, "flags.md", f"use {pattern} here\n")
    write(ws, ".env", "SECRET=1\n")
    output, is_error = kesi.grep(pattern)
    assert (output, is_error) == (f"flags.md:1:use {pattern} here", False)


@needs_rg
def test_grep_path_that_looks_like_an_option_is_a_path(ws):
    write(ws, "--hidden.txt", "needle\n")
    assert kesi.grep("needle", path="--hidden.txt") == ("--hidden.txt:1:needle", False)


@needs_rg
def test_grep_skips_ignored_names_while_walking(ws):
    for rel in (".env", ".env.local", "sub/.env.test", ".git/config", "node_modules/m/x.js",
                "pkg/node_modules/y.js", "venv/lib.py", "__pycache__/c.txt", "sub/.venv/z.py"):
        write(ws, rel, "NEEDLE\n")
    write(ws, "found.txt", "NEEDLE\n")
    assert kesi.grep("NEEDLE") == ("found.txt:1:NEEDLE", False)
    assert kesi.grep("NEEDLE", path="pkg")[0].startswith("No matches")
    assert kesi.grep("NEEDLE", glob="**/.env*")[0].startswith("No matches")
    assert kesi.grep("NEEDLE", glob="node_modules/**")[0].startswith("No matches")


@needs_rg
@pytest.mark.parametrize("path", [".env", ".env.local", "sub/../.env", ".git", "node_modules", "node_modules/m/x.js",
                                  "env-link"])
def test_grep_refuses_an_ignored_root(ws, path):
    for rel in (".env", ".env.local", "node_modules/m/x.js", ".git/config", "sub/other.txt"):
        write(ws, rel, "NEEDLE\n")
    os.symlink(ws / ".env", ws / "env-link")
    output, is_error = kesi.grep("NEEDLE", path=path)
    assert is_error and "off-limits" in output and "NEEDLE" not in output


@needs_rg
def test_grep_does_not_follow_symlinks_out_of_the_jail(escapes):
    write(escapes, "ok.txt", SECRET + " is mentioned here too\n")
    output, is_error = kesi.grep(SECRET)
    assert not is_error
    assert output == f"ok.txt:1:{SECRET} is mentioned here too"


@needs_rg
@pytest.mark.parametrize("path", ["leak.txt", "outdir", "outdir/secret.txt", "..", "/etc", "/etc/passwd",
                                  "../outside"])
def test_grep_refuses_a_root_outside_the_jail(escapes, path):
    assert_refused(kesi.grep("root", path=path), SECRET, "root:")


@needs_rg
def test_grep_refuses_a_fifo_root(ws):
    os.mkfifo(ws / "pipe")
    output, is_error = call_with_deadline(kesi.grep, "x", "pipe")
    assert is_error and "neither a file nor a directory" in output


@needs_rg
@pytest.mark.parametrize("glob", ["../*", "/etc/*", "~/*", "!../*", ""])
def test_grep_glob_must_stay_relative(ws, glob):
    write(ws, "a.txt", "x\n")
    output, is_error = kesi.grep("x", glob=glob)
    assert is_error and "glob" in output


@needs_rg
def test_grep_caps_at_100_lines_with_a_count(ws):
    write(ws, "many.txt", "".join(f"hit {n}\n" for n in range(1, 151)))
    output, is_error = kesi.grep("hit")
    lines = output.splitlines()
    assert not is_error
    assert len(lines) == kesi.MAX_SEARCH_LINES + 1
    assert lines[0] == "many.txt:1:hit 1" and lines[99] == "many.txt:100:hit 100"
    assert "150 matching lines" in lines[-1]


@needs_rg
def test_grep_trims_long_lines_and_replaces_bad_bytes(ws):
    write(ws, "min.js", "needle" + "q" * 5000 + "\n")
    write(ws, "raw.txt", b"needle \xff\xfe end\n")
    output, _ = kesi.grep("needle")
    by_file = dict(line.split(":", 1) for line in output.splitlines())
    assert "omitted" in by_file["min.js"] and len(by_file["min.js"]) < 400
    assert "\ufffd" in by_file["raw.txt"]


@needs_rg
def test_grep_passes_back_rg_regex_errors(ws):
    write(ws, "a.py", "def safe_path():\n")
    output, is_error = kesi.grep("(?<=def )safe_path")
    assert is_error and output.startswith("Search failed:")
    assert "look-around" in output and "--pcre2" in output


@pytest.mark.parametrize("pattern", ["", None, 3, ["x"]])
def test_grep_refuses_an_empty_or_non_text_pattern(ws, pattern):
    output, is_error = kesi.grep(pattern)
    assert is_error and "pattern" in output


def test_grep_says_so_when_rg_is_missing(ws, monkeypatch):
    write(ws, "a.txt", "x\n")
    monkeypatch.setattr(kesi, "RG_PATH", None)      # what shutil.which gave at start
    output, is_error = kesi.grep("x")
    assert is_error and "ripgrep" in output
    # The path checks still come first: a bad path is reported as such.
    output, is_error = kesi.grep("x", path="..")
    assert is_error and "outside the working directory" in output


def test_grep_survives_an_rg_path_that_vanished(ws, monkeypatch):
    write(ws, "a.txt", "x\n")
    monkeypatch.setattr(kesi, "RG_PATH", "/nonexistent/bin/rg")
    output, is_error = kesi.grep("x")
    assert is_error and "ripgrep" in output


@needs_rg
def test_grep_timeout_stops_a_hung_rg(ws, monkeypatch, tmp_path_factory):
    """A search that hangs (here an rg stand-in stuck opening a FIFO, as rg
    itself would be) is stopped by the timeout, with its whole process group."""
    write(ws, "log.txt", "x\n")
    bin_dir = tmp_path_factory.mktemp("hung-rg")
    fifo = bin_dir / "fifo"
    os.mkfifo(fifo)
    fake_rg = bin_dir / "rg"
    fake_rg.write_text(f"#!/bin/sh\nexec cat '{fifo}'\n")
    fake_rg.chmod(0o755)
    monkeypatch.setattr(kesi, "RG_PATH", str(fake_rg))
    monkeypatch.setattr(kesi, "GREP_TIMEOUT", 0.5)
    output, is_error = call_with_deadline(kesi.grep, "x", "log.txt", seconds=10)
    assert is_error and "longer than 0.5 s" in output
    # The stand-in was killed: nobody has the FIFO open for reading any more.
    with pytest.raises(OSError) as no_reader:
        os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    assert no_reader.value.errno == errno.ENXIO


def walks_started(monkeypatch) -> list[str]:
    """The prefix of every walk glob_files starts (it walks from the pattern's literal folder)."""
    starts, real_walk = [], kesi.walk_tree

    def walk(fd, depth=None, prefix=""):
        starts.append(prefix)
        return real_walk(fd, depth, prefix)
    monkeypatch.setattr(kesi, "walk_tree", walk)
    return starts


def test_glob_with_a_literal_folder_starts_there_and_finds_the_same(ws, monkeypatch):
    for rel in ("src/pkg/a.py", "src/pkg/b.txt", "src/pkg/deep/c.py", "src/other/d.py"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("x\n")
    starts = walks_started(monkeypatch)
    assert kesi.glob_files("src/pkg/*.py") == ("src/pkg/a.py", False) and starts == ["src/pkg/"]
    assert kesi.glob_files("src/pkg/**/*.py") == ("src/pkg/a.py\nsrc/pkg/deep/c.py", False)
    assert kesi.glob_files("src/*/*.py") == ("src/other/d.py\nsrc/pkg/a.py", False)
    assert kesi.glob_files("nope/*.py")[0].startswith("No accessible files")


def test_glob_literal_folder_through_a_symlink_is_not_a_shortcut(ws, tmp_path_factory, monkeypatch):
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.py").write_text("x\n")
    (ws / "out").symlink_to(outside, target_is_directory=True)
    (ws / "real").mkdir()
    (ws / "real" / "a.py").write_text("x\n")
    (ws / "inside").symlink_to(ws / "real", target_is_directory=True)
    (ws / "node_modules").mkdir()
    (ws / "node_modules" / "x.js").write_text("x\n")
    starts = walks_started(monkeypatch)
    for pattern in ("out/*.py", "out/**/*.py", "inside/*.py", "node_modules/*.js"):
        output, is_error = kesi.glob_files(pattern)
        assert not is_error and "secret" not in output and output.startswith("No accessible files")
    assert starts == []         # refused at the literal folder: no walk started through a link or an ignored name


# --- partial-view notes, and ignored names in any letter case -------------------------------------

def test_read_to_eof_with_a_cut_line_points_to_edit_file(ws):
    (ws / "long.txt").write_text("short\n" + "x" * (kesi.MAX_LINE_CHARS + 500) + "\nend\n")
    output, is_error = kesi.read_file("long.txt")
    assert not is_error
    assert "the file ends at line 3" in output
    assert "edit_file" in output
    assert "offset=" not in output
    assert (ws / "long.txt") not in kesi.READ_VERSIONS


def test_offset_read_to_eof_says_end_of_file(ws):
    (ws / "five.txt").write_text("".join(f"line {n}\n" for n in range(1, 6)))
    output, is_error = kesi.read_file("five.txt", offset=3)
    assert not is_error
    assert "lines 3-5, the end of the file" in output
    assert "offset=" not in output
    assert kesi.READ_VERSIONS == {}


def test_ignored_names_are_case_insensitive(ws):
    (ws / ".ENV").write_text("KEY=1\n")
    (ws / ".Env").mkdir()
    (ws / "keep.txt").write_text("ok\n")
    (ws / "NODE_MODULES" / "pkg").mkdir(parents=True)
    (ws / "NODE_MODULES" / "pkg" / "index.js").write_text("x\n")

    output, is_error = kesi.read_file(".ENV")
    assert is_error and "off-limits" in output

    listing, _ = kesi.list_files(".")
    assert "keep.txt" in listing
    assert ".Env" not in listing and ".ENV" not in listing

    hits, _ = kesi.glob_files("**/*")
    assert "keep.txt" in hits
    assert "NODE_MODULES" not in hits and "index.js" not in hits
