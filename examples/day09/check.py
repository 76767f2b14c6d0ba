# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 09 checks: edit_file (exact, unique, byte-preserving, atomic).

Tool-level checks on real files, then two scripted model runs through the
real agent loop and the local mock API. Run: uv run examples/day09/check.py
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 09: edit_file")


def leftovers(root: Path) -> list[str]:
    """Temp files an atomic write may have left behind."""
    return [p.name for p in root.rglob("*.tmp")]


# --- the basic cases ---------------------------------------------------------

with workspace({"app.py": "a = 1\nb = 2\nc = 3\n"}) as root:
    out, err = kesi.edit_file("app.py", "b = 2", "b = 20")
    checks.check("a unique match is replaced and nothing else changes",
                 not err and (root / "app.py").read_text() == "a = 1\nb = 20\nc = 3\n", out)

failures = {
    "not found": ("x = 1", "x = 2", "not found"),
    "two matches": ("= ", "== ", "more than once"),
    "empty old_string": ("", "x", "must not be empty"),
    "old_string == new_string": ("a = 1", "a = 1", "identical"),
}
for label, (old, new, words) in failures.items():
    with workspace({"app.py": "a = 1\nb = 2\n"}) as root:
        before = (root / "app.py").read_bytes()
        out, err = kesi.edit_file("app.py", old, new)
        checks.check(f"{label}: error, file untouched",
                     err and words in out and (root / "app.py").read_bytes() == before, out)

with workspace({"m.txt": "one\ntwo\nthree\nfour\n"}) as root:
    out, err = kesi.edit_file("m.txt", "two\nthree\n", "2\n3\n")
    ok_multi = not err and (root / "m.txt").read_text() == "one\n2\n3\nfour\n"
    out2, err2 = kesi.edit_file("m.txt", "2", "")
    checks.check("multi-line blocks replace; empty new_string deletes (the newline stays)",
                 ok_multi and not err2 and (root / "m.txt").read_text() == "one\n\n3\nfour\n",
                 (root / "m.txt").read_text())

outside = Path("/tmp") / f"kesi-day09-outside-{os.getpid()}.txt"
outside.write_text("outside\n")
try:
    with workspace({"bin.dat": b"\xff\xfe\x00x", "dir/keep.txt": "k\n", ".env": "KEY=1\n"}) as root:
        (root / "env-link").symlink_to(root / ".env")
        (root / "out-link").symlink_to(outside)
        cases = {"a non-UTF-8 file": ("bin.dat", "not UTF-8"), "a directory": ("dir", "not a regular"),
                 "a path outside the jail": (str(outside), "outside"), "../ escape": ("../x.txt", "outside"),
                 "a symlink to .env": ("env-link", "off-limits"), "a symlink outside": ("out-link", "outside")}
        for label, (path, words) in cases.items():
            out, err = kesi.edit_file(path, "x", "y")
            checks.check(f"{label} is rejected", err and words in out, out)
        checks.check("…and neither .env nor the outside file changed",
                     (root / ".env").read_text() == "KEY=1\n" and outside.read_text() == "outside\n")
finally:
    outside.unlink()

# --- bytes and line numbers --------------------------------------------------

with workspace({"lf.txt": "a\nb\nc\n", "crlf.txt": b"a\r\nb\r\nc\r\n", "cr.txt": b"a\rb\rc\r"}) as root:
    lines = {name: kesi.edit_file(name, "c", "C")[0] for name in ("lf.txt", "crlf.txt", "cr.txt")}
    checks.check("start line is right for LF, CRLF and lone-CR files",
                 all("line 3" in text for text in lines.values()), lines)
    checks.check("…and each file keeps its own line endings",
                 (root / "crlf.txt").read_bytes() == b"a\r\nb\r\nC\r\n" and
                 (root / "cr.txt").read_bytes() == b"a\rb\rC\r")

with workspace({"work.txt": "aaa"}) as root:
    out, err = kesi.edit_file("work.txt", "aa", "X")
    checks.check("overlapping matches count as two ('aa' in 'aaa')",
                 err and "more than once" in out and (root / "work.txt").read_text() == "aaa", out)

with workspace({"c.py": b"x = 1\r\ny = 2\r\n"}) as root:
    out_lf, err_lf = kesi.edit_file("c.py", "x = 1\n", "x = 9\n")
    out_crlf, err_crlf = kesi.edit_file("c.py", "x = 1\r\n", "x = 9\r\n")
    checks.check("an LF old_string does not match a CRLF file (and says why)",
                 err_lf and "CRLF" in out_lf, out_lf)
    checks.check("the CRLF old_string matches and the other line ending is kept",
                 not err_crlf and (root / "c.py").read_bytes() == b"x = 9\r\ny = 2\r\n",
                 (root / "c.py").read_bytes())

with workspace({"t.py": "total = 0\ncount += 1\nprint(total)\n"}):
    out, err = kesi.edit_file("t.py", "count += 1", "count += 2")
    checks.check("the success message names the start line (2)", not err and "line 2" in out, out)

with workspace({"r.py": "n = 1\nn = 1\nm = 1\n"}) as root:
    out, err = kesi.edit_file("r.py", "n = 1", "n = 2", replace_all=True)
    checks.check("replace_all changes every occurrence and reports the count",
                 not err and "2 occurrences" in out and (root / "r.py").read_text() == "n = 2\nn = 2\nm = 1\n", out)

with workspace({"u.txt": "hello\n"}) as root:
    out, err = kesi.edit_file("u.txt", "hello", "\ud800")
    checks.check("a new_string that cannot be UTF-8 is refused, file untouched",
                 err and "UTF-8" in out and (root / "u.txt").read_text() == "hello\n", out)

# --- atomic write ------------------------------------------------------------

with workspace({"run.sh": "echo old\n"}) as root:
    target = root / "run.sh"
    os.chmod(target, 0o750)
    inode = target.stat().st_ino
    out, err = kesi.edit_file("run.sh", "old", "new")
    info = target.stat()
    checks.check("the edit is a temp file + rename: new inode, mode 0750 kept, no temp left",
                 not err and info.st_ino != inode and (info.st_mode & 0o777) == 0o750
                 and not leftovers(root), (oct(info.st_mode), leftovers(root)))

with workspace({"keep.txt": "safe\n"}) as root:
    real_replace = kesi.os.replace

    def broken_replace(src, dst, **folders):
        raise OSError(28, "No space left on device")
    kesi.os.replace = broken_replace
    try:
        out, err = kesi.edit_file("keep.txt", "safe", "lost")
    finally:
        kesi.os.replace = real_replace
    checks.check("a failed rename leaves the file untouched and no temp file",
                 err and "No space" in out and (root / "keep.txt").read_text() == "safe\n"
                 and not leftovers(root), out)

# --- scripted model runs through the real loop --------------------------------

with workspace({"greet.py": 'def greet():\n    print("helo")\n'}) as root:
    kesi.PERMISSION_MODE = "acceptEdits"
    script = [reply("Let me look at greet.py.", tool_call("read_file", {"file_path": "greet.py"})),
              reply(None, tool_call("edit_file", {"file_path": "greet.py", "old_string": 'print("helo")',
                                                  "new_string": 'print("hello")'})),
              reply("Fixed the typo: helo is now hello.")]
    with mock_client(script) as (mock, client):
        history = [{"role": "user", "content": "In greet.py, change helo to hello."}]
        answer = kesi.run_agent(client, history)
    results = [b for m in history if isinstance(m["content"], list) for b in m["content"]
               if b.get("type") == "tool_result"]
    checks.check("model demo: read, then edit; the file is fixed",
                 answer.ok and 'print("hello")' in (root / "greet.py").read_text()
                 and len(results) == 2 and not any(r["is_error"] for r in results), answer.text)

with workspace({"loop.py": "total = 0\nfor i in range(3):\n    count += 1\nfor j in range(3):\n    count += 1\n"}) as root:
    kesi.PERMISSION_MODE = "acceptEdits"
    context = "for j in range(3):\n    count += 1\n"
    script = [reply(None, tool_call("edit_file", {"file_path": "loop.py", "old_string": "count += 1",
                                                  "new_string": "count += 2"})),
              reply("Not unique; adding the loop header.",
                    tool_call("edit_file", {"file_path": "loop.py", "old_string": context,
                                            "new_string": context.replace("+= 1", "+= 2")})),
              reply("Changed the second loop only.")]
    with mock_client(script) as (mock, client):
        history = [{"role": "user", "content": "Make the second loop add 2."}]
        answer = kesi.run_agent(client, history)
    first_result = history[2]["content"][0]
    checks.check("model demo: an ambiguous edit fails, the retry with context succeeds",
                 first_result["is_error"] and "more than once" in first_result["content"]
                 and (root / "loop.py").read_text().count("count += 1") == 1
                 and (root / "loop.py").read_text().endswith("count += 2\n") and len(mock.requests) == 3,
                 (root / "loop.py").read_text())

sys.exit(checks.finish())
