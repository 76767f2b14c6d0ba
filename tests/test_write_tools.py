"""edit_file and write_file: exact edits, read-before-write, atomic writes.

Real files in a temporary jail (the `ws` fixture). Failures are injected
only where a real race or disk error cannot be produced on demand, by
wrapping the real function so it misbehaves once, at the moment of interest.
"""
import os
import stat
import tempfile

import pytest

import kesi


def snapshot(path):
    """Everything a failed edit must leave alone: bytes, inode and mtime."""
    info = path.stat()
    return path.read_bytes(), info.st_ino, info.st_mtime_ns


def temp_leftovers(folder):
    return sorted(p.name for p in folder.rglob("*.tmp"))


# --- edit_file: guards ------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    ((1, "a", "b"), "must all be strings"),
    (("f.txt", None, "b"), "must all be strings"),
    (("f.txt", "", "b"), "must not be empty"),
    (("f.txt", "alpha", "alpha"), "identical"),
    (("f.txt", "missing", "x"), "not found"),
    (("f.txt", "a", "x"), "more than once"),                 # alpha, beta, gamma: 'a' everywhere
    (("f.txt", "ALPHA", "x"), "not found"),                  # case matters
    (("f.txt", "alpha\tbeta", "x"), "not found"),            # a tab is not a newline
])
def test_edit_refusals_leave_the_file_untouched(ws, args, words):
    target = ws / "f.txt"
    target.write_text("alpha\nbeta\ngamma\n")
    before = snapshot(target)
    output, is_error = kesi.edit_file(*args)
    assert is_error and words in output
    assert snapshot(target) == before


def test_replace_all_must_be_a_boolean(ws):
    (ws / "f.txt").write_text("a a\n")
    output, is_error = kesi.edit_file("f.txt", "a", "b", replace_all="yes")
    assert is_error and "true or false" in output
    assert (ws / "f.txt").read_text() == "a a\n"


@pytest.mark.parametrize("path, words", [
    (".git/config", "off-limits"),
    ("node_modules/pkg/index.js", "off-limits"),
    (".env.production", "off-limits"),
    ("sub", "not a regular text file"),
    ("../outside.txt", "outside"),
    ("nothing-here.txt", "not found"),
])
def test_edit_refuses_paths_it_may_not_touch(ws, path, words):
    for rel in (".git/config", "node_modules/pkg/index.js", ".env.production", "sub/x.txt"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("a = 1\n")
    output, is_error = kesi.edit_file(path, "a = 1", "a = 2")
    assert is_error and words in output
    assert (ws / ".git/config").read_text() == "a = 1\n"


def test_edit_refuses_a_fifo_without_blocking(ws):
    os.mkfifo(ws / "pipe")
    output, is_error = kesi.edit_file("pipe", "a", "b")
    assert is_error and "not a regular text file" in output


def test_edit_through_a_symlink_changes_the_real_file_and_keeps_the_link(ws):
    (ws / "real.py").write_text("x = 1\n")
    (ws / "link.py").symlink_to(ws / "real.py")
    output, is_error = kesi.edit_file("link.py", "x = 1", "x = 2")
    assert not is_error, output
    assert (ws / "link.py").is_symlink()
    assert (ws / "real.py").read_text() == "x = 2\n"


# --- edit_file: matching, bytes and line numbers ----------------------------------------------

@pytest.mark.parametrize("content, old", [("aaa", "aa"), ("ababab", "abab"), ("x\nx\nx", "x\nx")])
def test_overlapping_matches_are_not_unique(ws, content, old):
    (ws / "f.txt").write_bytes(content.encode())
    output, is_error = kesi.edit_file("f.txt", old, "Z")
    assert is_error and "more than once" in output
    assert (ws / "f.txt").read_bytes() == content.encode()


@pytest.mark.parametrize("data, old, line", [
    (b"a\nb\nc\n", "c", 3),
    (b"a\r\nb\r\nc\r\n", "c", 3),
    (b"a\rb\rc\r", "c", 3),
    (b"a\r\nb\nc\rd\n", "d", 4),            # mixed endings each count once
    (b"only", "only", 1),
])
def test_the_start_line_is_reported_for_every_line_ending(ws, data, old, line):
    (ws / "f.txt").write_bytes(data)
    output, is_error = kesi.edit_file("f.txt", old, "X")
    assert not is_error and f"line {line}" in output


def test_line_endings_and_a_bom_are_kept_byte_for_byte(ws):
    original = b"\xef\xbb\xbfx = 1\r\ny = 2\r\nz = 3\r\n"
    (ws / "w.py").write_bytes(original)
    output, is_error = kesi.edit_file("w.py", "y = 2", "y = 20")
    assert not is_error, output
    assert (ws / "w.py").read_bytes() == original.replace(b"y = 2", b"y = 20")


def test_an_lf_old_string_does_not_match_crlf_and_the_hint_says_so(ws):
    (ws / "w.py").write_bytes(b"x = 1\r\ny = 2\r\n")
    output, is_error = kesi.edit_file("w.py", "x = 1\ny = 2", "z")
    assert is_error and "CRLF" in output


def test_empty_new_string_deletes_only_the_match(ws):
    (ws / "f.txt").write_text("keep\ndrop me\nkeep\n")
    kesi.edit_file("f.txt", "drop me", "")
    assert (ws / "f.txt").read_text() == "keep\n\nkeep\n"
    kesi.edit_file("f.txt", "keep\n\n", "")
    assert (ws / "f.txt").read_text() == "keep\n"


def test_replace_all_replaces_every_occurrence(ws):
    (ws / "f.txt").write_text("n = 1\nn = 1\nm = 1\n")
    output, is_error = kesi.edit_file("f.txt", "n = 1", "n = 2", replace_all=True)
    assert not is_error and "2 occurrences" in output and "line 1" in output
    assert (ws / "f.txt").read_text() == "n = 2\nn = 2\nm = 1\n"


def test_replace_all_with_one_match_is_a_normal_edit(ws):
    (ws / "f.txt").write_text("a\nb\n")
    output, is_error = kesi.edit_file("f.txt", "b", "B", replace_all=True)
    assert not is_error and output == "Edited f.txt (starting at line 2)."


def test_a_new_string_that_is_not_utf8_is_refused(ws):
    (ws / "f.txt").write_text("hello\n")
    before = snapshot(ws / "f.txt")
    output, is_error = kesi.edit_file("f.txt", "hello", "\udc80")
    assert is_error and "UTF-8" in output
    assert snapshot(ws / "f.txt") == before


def test_a_non_utf8_file_is_refused(ws):
    (ws / "latin1.txt").write_bytes("caf\xe9\n".encode("latin-1"))
    output, is_error = kesi.edit_file("latin1.txt", "caf", "CAF")
    assert is_error and "not UTF-8" in output


# --- edit_file: the atomic write ---------------------------------------------------------------

def test_edit_writes_a_temp_file_in_the_same_folder_fsyncs_then_renames(ws, monkeypatch):
    (ws / "sub").mkdir()
    target = ws / "sub" / "f.txt"
    target.write_text("old\n")
    os.chmod(target, 0o604)
    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(kesi.os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])

    def spy_replace(src, dst, *, src_dir_fd, dst_dir_fd):
        folder = os.readlink(f"/proc/self/fd/{src_dir_fd}")
        events.append(("replace", folder, oct(stat.S_IMODE(os.stat(src, dir_fd=src_dir_fd).st_mode))))
        assert src_dir_fd == dst_dir_fd and dst == "f.txt"
        real_replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    monkeypatch.setattr(kesi.os, "replace", spy_replace)
    inode = target.stat().st_ino
    output, is_error = kesi.edit_file("sub/f.txt", "old", "new")
    assert not is_error, output
    assert events == ["fsync", ("replace", str(ws / "sub"), "0o604")]
    assert target.read_text() == "new\n" and target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o604
    assert temp_leftovers(ws) == []


def test_a_file_changed_while_the_edit_was_written_is_not_clobbered(ws, monkeypatch):
    target = ws / "f.txt"
    target.write_text("x = 1\n")
    real_fsync = os.fsync

    def fsync_while_someone_writes(fd):      # the temp file is written: someone else writes too
        target.write_text("x = 1\nsomeone = 'else'\n")
        real_fsync(fd)
    monkeypatch.setattr(kesi.os, "fsync", fsync_while_someone_writes)
    output, is_error = kesi.edit_file("f.txt", "x = 1", "x = 2")
    assert is_error and "changed after you read it" in output
    assert target.read_text() == "x = 1\nsomeone = 'else'\n"
    assert temp_leftovers(ws) == []


def test_a_disk_error_during_the_edit_leaves_the_file_and_no_temp(ws, monkeypatch):
    target = ws / "f.txt"
    target.write_text("safe\n")

    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(kesi.os, "fsync", disk_full)
    output, is_error = kesi.edit_file("f.txt", "safe", "lost")
    assert is_error and "No space left" in output
    assert target.read_text() == "safe\n"
    assert temp_leftovers(ws) == []


def test_a_successful_edit_forgets_the_read_version(ws):
    (ws / "f.txt").write_text("a\n")
    kesi.read_file("f.txt")
    assert (ws / "f.txt") in kesi.READ_VERSIONS
    kesi.edit_file("f.txt", "a", "b")
    assert (ws / "f.txt") not in kesi.READ_VERSIONS


# --- write_file: creating -------------------------------------------------------------------------

def test_create_makes_folders_and_counts_utf8_bytes(ws):
    output, is_error = kesi.write_file("docs/deep/TODO.md", "# 待辦\n")
    assert (output, is_error) == ("Created docs/deep/TODO.md (9 bytes).", False)
    assert (ws / "docs/deep/TODO.md").read_bytes() == "# 待辦\n".encode()


def test_create_writes_text_exactly_as_given(ws):
    kesi.write_file("crlf.txt", "a\r\nb\r")
    assert (ws / "crlf.txt").read_bytes() == b"a\r\nb\r"


def test_create_does_not_count_as_a_read(ws):
    kesi.write_file("new.txt", "one\n")
    output, is_error = kesi.write_file("new.txt", "two\n")
    assert is_error and "read_file" in output
    assert (ws / "new.txt").read_text() == "one\n"


def test_create_never_clobbers_a_file_that_appears_after_the_checks(ws, monkeypatch):
    real_open = os.open

    def another_program_creates_it_first(path, flags, *args, **kwargs):
        if path == "race.txt" and flags & os.O_EXCL:   # after every check, right before the exclusive open
            (ws / "race.txt").write_bytes(b"theirs\n")
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(kesi.os, "open", another_program_creates_it_first)
    output, is_error = kesi.write_file("race.txt", "ours\n")
    assert is_error and "just created by something else" in output
    assert (ws / "race.txt").read_text() == "theirs\n"


def test_a_failed_create_removes_its_half_written_file(ws, monkeypatch):
    def disk_full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(kesi.os, "fsync", disk_full)
    output, is_error = kesi.write_file("half.txt", "x" * 10_000)
    assert is_error and "No space left" in output
    assert not (ws / "half.txt").exists()


def test_a_folder_swapped_for_an_outside_symlink_is_caught_on_the_recheck(ws, monkeypatch, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside")
    (ws / "sub").mkdir()
    real_open = os.open

    def swap_folder(path, flags, *args, **kwargs):   # checked as a folder, then swapped before the open
        if path == "sub" and (ws / "sub").is_dir() and not (ws / "sub").is_symlink():
            (ws / "sub").rmdir()
            (ws / "sub").symlink_to(outside)
        return real_open(path, flags, *args, **kwargs)
    monkeypatch.setattr(kesi.os, "open", swap_folder)
    output, is_error = kesi.write_file("sub/f.txt", "x\n")
    assert is_error and "not allowed" in output
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("content, words", [(None, "must both be strings"), ("\ud800", "UTF-8")])
def test_bad_content_is_refused_before_any_path_work(ws, content, words):
    output, is_error = kesi.write_file("new/f.txt", content)
    assert is_error and words in output
    assert not (ws / "new").exists()


@pytest.mark.parametrize("path", ["", " ", "/abs.txt", "~/x.txt", "~", "C:\\x.txt", "C:x.txt", "\\x.txt",
                                  "..", "../x.txt", "a/../../x.txt", ".", "./", "a/..", 5])
def test_write_refuses_paths_outside_or_not_files(ws, path):
    output, is_error = kesi.write_file(path, "x\n")
    assert is_error
    assert list(ws.iterdir()) == []


def test_write_refuses_ignored_targets_after_resolving(ws):
    (ws / ".env").write_text("KEY=1\n")
    (ws / "innocent.txt").symlink_to(ws / ".env")
    for path in (".env", ".env.local", "innocent.txt", ".git/config", "node_modules/x.js"):
        output, is_error = kesi.write_file(path, "KEY=2\n")
        assert is_error and "off-limits" in output, path
    assert (ws / ".env").read_text() == "KEY=1\n"
    assert not (ws / ".git").exists() and not (ws / "node_modules").exists()


def test_a_parent_that_is_a_file_gives_a_folder_error(ws):
    (ws / "a.txt").write_text("file\n")
    output, is_error = kesi.write_file("a.txt/b.txt", "x\n")
    assert is_error and "folder" in output
    assert (ws / "a.txt").read_text() == "file\n"


# --- write_file: overwriting ------------------------------------------------------------------------

def test_overwrite_needs_a_full_read_and_then_needs_it_again(ws):
    target = ws / "config.py"
    target.write_text("DEBUG = False\n")
    assert kesi.write_file("config.py", "DEBUG = True\n")[1] is True
    kesi.read_file("config.py")
    assert kesi.write_file("config.py", "DEBUG = True\n") == ("Overwrote config.py (13 bytes).", False)
    output, is_error = kesi.write_file("config.py", "DEBUG = 1\n")       # the record is used up
    assert is_error and "read_file" in output
    assert target.read_text() == "DEBUG = True\n"


def test_a_partial_read_does_not_allow_an_overwrite(ws):
    (ws / "f.txt").write_text("1\n2\n3\n")
    kesi.read_file("f.txt", offset=2)
    assert kesi.write_file("f.txt", "new\n")[1] is True
    assert (ws / "f.txt").read_text() == "1\n2\n3\n"


def test_an_external_change_after_the_read_blocks_the_overwrite_and_the_record(ws):
    target = ws / "f.txt"
    target.write_text("v1\n")
    kesi.read_file("f.txt")
    target.write_text("v2\n")
    output, is_error = kesi.write_file("f.txt", "mine\n")
    assert is_error and "changed after you read it" in output
    assert target not in kesi.READ_VERSIONS
    target.write_text("v1\n")                        # back to what was read: still refused
    assert kesi.write_file("f.txt", "mine\n")[1] is True


def test_a_change_during_the_overwrite_is_caught_by_the_final_hash_check(ws, monkeypatch):
    target = ws / "f.txt"
    target.write_text("v1\n")
    kesi.read_file("f.txt")
    real_fsync = os.fsync

    def fsync_while_someone_writes(fd):
        target.write_text("theirs\n")
        real_fsync(fd)
    monkeypatch.setattr(kesi.os, "fsync", fsync_while_someone_writes)
    output, is_error = kesi.write_file("f.txt", "mine\n")
    assert is_error and "changed after you read it" in output
    assert target.read_text() == "theirs\n"
    assert temp_leftovers(ws) == []


def test_identical_content_writes_nothing_and_keeps_the_record(ws):
    target = ws / "f.txt"
    target.write_text("same\n")
    kesi.read_file("f.txt")
    mtime = target.stat().st_mtime_ns
    output, is_error = kesi.write_file("f.txt", "same\n")
    assert not is_error and "nothing was written" in output
    assert target.stat().st_mtime_ns == mtime and target in kesi.READ_VERSIONS


def test_overwrite_is_atomic_and_keeps_the_mode(ws):
    target = ws / "run.sh"
    target.write_text("echo 1\n")
    os.chmod(target, 0o751)
    inode = target.stat().st_ino
    kesi.read_file("run.sh")
    assert kesi.write_file("run.sh", "echo 2\n")[1] is False
    assert target.stat().st_ino != inode
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert temp_leftovers(ws) == []


def test_a_directory_cannot_be_overwritten(ws):
    (ws / "d").mkdir()
    output, is_error = kesi.write_file("d", "x\n")
    assert is_error and "not a regular file" in output


def test_any_read_attempt_forgets_the_old_version(ws):
    (ws / "f.txt").write_text("a\n")
    kesi.read_file("f.txt")
    kesi.read_file("f.txt", limit=0)                 # refused: a bad limit
    assert (ws / "f.txt") not in kesi.READ_VERSIONS


def test_reset_clears_the_version_records(ws):
    (ws / "f.txt").write_text("a\n")
    kesi.read_file("f.txt")
    history = [{"role": "user", "content": "x"}]
    kesi.handle_slash("/reset", None, history)
    assert kesi.READ_VERSIONS == {} and history == []


# --- the schemas --------------------------------------------------------------------------------

def test_tool_specs_are_strict_and_list_the_right_arguments():
    specs = {t["name"]: t for t in kesi.TOOLS}
    edit, write = specs["edit_file"], specs["write_file"]
    assert edit["input_schema"]["required"] == ["file_path", "old_string", "new_string"]
    assert "replace_all" in edit["input_schema"]["properties"]
    assert write["input_schema"]["required"] == ["file_path", "content"]
    for spec in (edit, write):
        assert spec.get("strict") is True and spec["input_schema"]["additionalProperties"] is False
    assert kesi.TOOL_FUNCS["edit_file"] is kesi.edit_file and kesi.TOOL_FUNCS["write_file"] is kesi.write_file


def test_replace_all_refuses_a_result_too_big_to_hold(ws):
    """1 MB of 'a' with a 300-character replacement would be 300 MB in memory."""
    path = ws / "bomb.txt"
    path.write_text("a" * 1_000_000)
    kesi.read_file("bomb.txt")
    result, is_error = kesi.edit_file("bomb.txt", "a", "b" * 300, replace_all=True)
    assert is_error and "edit fewer at a time" in result, result[:200]
    assert path.read_text() == "a" * 1_000_000


@pytest.mark.parametrize("tool", ["edit_file", "write_file"])
def test_a_planned_change_whose_folder_went_makes_no_folders(ws, tool):
    """Between the question and the write the folder is removed: refused as a change, nothing is made again."""
    (ws / "d").mkdir()
    (ws / "d" / "f.txt").write_text("alpha\n")
    kesi.read_file("d/f.txt")
    plan, error = (kesi.plan_edit("d/f.txt", "alpha", "beta") if tool == "edit_file"
                   else kesi.plan_write("d/f.txt", "beta\n"))
    assert error is None and plan.expected is not None
    (ws / "d" / "f.txt").unlink()
    (ws / "d").rmdir()
    output, is_error = kesi.apply_write(plan)
    assert is_error and "changed after you read it" in output
    assert not (ws / "d").exists()
