# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 10 checks: write_file with read-before-write, and cut-off replies.

Tool-level checks on real files, then scripted model runs through the real
agent loop and the local mock API. Run: uv run examples/day10/check.py
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, mock_client, tool_results, workspace   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 10: write_file")


# --- the four acceptance checks -------------------------------------------------

with workspace({"config.py": "DEBUG = False\n"}) as root:
    config = root / "config.py"
    out, err = kesi.write_file("config.py", "DEBUG = True\n")
    checks.check("1. overwriting an unread file is refused and the file stays",
                 err and "read_file" in out and config.read_text() == "DEBUG = False\n", out)
    kesi.read_file("config.py")
    out, err = kesi.write_file("config.py", "DEBUG = True\n")
    checks.check("2. after read_file the overwrite succeeds (13 bytes)",
                 not err and out == "Overwrote config.py (13 bytes)." and config.read_text() == "DEBUG = True\n", out)
    kesi.read_file("config.py")
    config.write_text("DEBUG = False\nEXTRA = 1\n")          # someone else edits it
    out, err = kesi.write_file("config.py", "DEBUG = True\n")
    checks.check("3. a file changed after the read is not overwritten; EXTRA survives",
                 err and "changed after you read it" in out and "EXTRA = 1" in config.read_text(), out)

with workspace() as root:
    out, err = kesi.write_file("docs/TODO.md", "# 待辦\n")
    checks.check("4. a new file is created with its folder; size counted in UTF-8 bytes (9)",
                 not err and out == "Created docs/TODO.md (9 bytes)." and (root / "docs/TODO.md").is_file(), out)
    out, err = kesi.write_file("docs/TODO.md", "# changed\n")
    checks.check("creating a file does not count as reading it", err and "read_file" in out, out)

# --- the version records -------------------------------------------------------

with workspace({"a.py": "x = 1\n"}) as root:
    kesi.read_file("a.py")
    kesi.edit_file("a.py", "x = 1", "x = 2")
    out, err = kesi.write_file("a.py", "x = 3\n")
    checks.check("a successful edit_file clears the record", err and "read_file" in out, out)
    kesi.read_file("a.py")
    kesi.read_file("a.py", offset=0)                         # a failed read attempt
    out, err = kesi.write_file("a.py", "x = 3\n")
    checks.check("a failed read clears the record", err and "read_file" in out, out)

with workspace({"long.txt": "1\n2\n3\n"}):
    kesi.read_file("long.txt", limit=1)
    out, err = kesi.write_file("long.txt", "all new\n")
    checks.check("a partial read (limit=1 of 3 lines) does not count as a read", err and "read_file" in out, out)

with workspace({"same.txt": "same\n"}) as root:
    kesi.read_file("same.txt")
    out, err = kesi.write_file("same.txt", "same\n")
    out2, err2 = kesi.write_file("same.txt", "other\n")
    checks.check("identical content: nothing written, record kept for a real overwrite next",
                 not err and "nothing was written" in out and not err2 and (root / "same.txt").read_text() == "other\n",
                 (out, out2))

with workspace({"notes.md": "old\n"}) as root:
    kesi.read_file("notes.md")
    history = [{"role": "user", "content": "hi"}]
    kesi.handle_slash("/reset", None, history)
    out, err = kesi.write_file("notes.md", "new\n")
    checks.check("/reset clears the history and the version records",
                 history == [] and err and (root / "notes.md").read_text() == "old\n", out)

# --- where it may write ---------------------------------------------------------

outside = Path("/tmp") / f"kesi-day10-outside-{os.getpid()}"
outside.mkdir(exist_ok=True)
try:
    with workspace({".env": "KEY=1\n", "sub/keep.txt": "k\n"}) as root:
        (root / "env-link").symlink_to(root / ".env")
        (root / "out-link").symlink_to(outside)
        refused = ["/etc/kesi-test", "~/kesi-test", "C:\\kesi.txt", "\\kesi.txt", "../escape.txt",
                   "sub/../../escape.txt", ".", "  ", "out-link/x.txt"]
        results = {path: kesi.write_file(path, "x\n") for path in refused}
        checks.check("absolute, ~, drive, root, '..', the jail itself, blank and outside symlinks are refused",
                     all(err and "not allowed" in out for out, err in results.values()),
                     {p: o for p, (o, e) in results.items() if not (e and "not allowed" in o)})
        ignored = {path: kesi.write_file(path, "KEY=2\n") for path in (".env", ".env.local", "env-link")}
        checks.check(".env, .env.local and a symlink to .env are off-limits (checked on the resolved path)",
                     all(err and "off-limits" in out for out, err in ignored.values()), ignored)
        out, err = kesi.write_file("sub/../.env", "KEY=2\n")   # refused earlier: any '..' segment
        checks.check("sub/../.env is refused too, and no secret file was touched",
                     err and (root / ".env").read_text() == "KEY=1\n" and not (root / ".env.local").exists(), out)
        checks.check("nothing was written outside the jail", not any(outside.iterdir()) and not Path("/etc/kesi-test").exists())
        out, err = kesi.write_file("sub", "x\n")
        checks.check("a directory cannot be overwritten", err and "not a regular file" in out, out)
finally:
    for leftover in outside.iterdir():
        leftover.unlink()
    outside.rmdir()

with workspace({"run.sh": "echo old\n"}) as root:
    target = root / "run.sh"
    os.chmod(target, 0o750)
    inode = target.stat().st_ino
    kesi.read_file("run.sh")
    out, err = kesi.write_file("run.sh", "echo new\n")
    info = target.stat()
    checks.check("the overwrite is atomic (new inode), keeps mode 0750, leaves no temp file",
                 not err and info.st_ino != inode and (info.st_mode & 0o777) == 0o750
                 and not list(root.glob(".*.tmp")), oct(info.st_mode))

with workspace() as root:
    real_open = kesi.os.open

    def racing_open(path, flags, *args, **kwargs):
        # Right before the exclusive create is where another program sneaks in.
        if path == "race.txt" and flags & os.O_EXCL:
            (root / "race.txt").write_text("theirs\n")
        return real_open(path, flags, *args, **kwargs)
    kesi.os.open = racing_open
    try:
        out, err = kesi.write_file("race.txt", "ours\n")
    finally:
        kesi.os.open = real_open
    checks.check("a file that appears just before the write is never clobbered",
                 err and (root / "race.txt").read_text() == "theirs\n", out)

# --- scripted model runs ---------------------------------------------------------

with workspace({"config.py": "DEBUG = False\n"}) as root:
    kesi.PERMISSION_MODE = "acceptEdits"
    todo = "# TODO\n- buy milk\n- write tests\n- call mom\n"
    script = [reply(None, tool_call("write_file", {"file_path": "TODO.md", "content": todo})),
              reply("Created TODO.md with three items."),
              reply(None, tool_call("write_file", {"file_path": "config.py", "content": "DEBUG = True\n"})),
              reply("I need to read it first.", tool_call("read_file", {"file_path": "config.py"})),
              reply(None, tool_call("write_file", {"file_path": "config.py", "content": "DEBUG = True\n"})),
              reply("config.py now holds DEBUG = True.")]
    with mock_client(script) as (mock, client):
        history = [{"role": "user", "content": "Create TODO.md with three things to do."}]
        kesi.run_agent(client, history)
        created = (root / "TODO.md").read_text() == todo
        history.append({"role": "user", "content": "Replace all of config.py with DEBUG = True."})
        answer = kesi.run_agent(client, history)
    results = tool_results(history)
    checks.check("model demo: a new file is written directly, without a read", created and not results[0]["is_error"])
    checks.check("model demo: skipping the read is blocked; read, then write succeeds",
                 answer.ok and results[1]["is_error"] and not results[3]["is_error"]
                 and (root / "config.py").read_text() == "DEBUG = True\n", [r["content"] for r in results])

with workspace() as root:
    kesi.PERMISSION_MODE = "acceptEdits"
    cut = reply(None, tool_call("write_file", {"file_path": "big.txt", "content": "cut off"}), stop_reason="max_tokens")
    script = [cut, cut, reply("Smaller step then.")]      # cut inside a tool call: asked again once, cut again
    with mock_client(script) as (mock, client):
        history = [{"role": "user", "content": "Write a big file."}]
        answer = kesi.run_agent(client, history)
        stopped = not answer.ok and "max_tokens" in answer.text and not (root / "big.txt").exists()
        only_notice = history[-1] == {"role": "assistant", "content": answer.text}
        history.append({"role": "user", "content": "Try a smaller step."})
        again = kesi.run_agent(client, history)
    checks.check("a reply cut off at max_tokens runs no tool and says so", stopped, answer.text)
    checks.check("…only the notice is recorded, and the next request is valid",
                 only_notice and len(history) == 4 and again.ok and mock.requests[-1]["status"] == 200)

sys.exit(checks.finish())
