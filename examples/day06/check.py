# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 06 checks: read_file and the agent loop.

First read_file's guards on real files (the jail, FIFOs, directories, strict
UTF-8, the line-numbered offset/limit view), then scripted conversations
through the real agent loop, the real SDK and the local mock API, which
rejects any journal the real API would reject.
Run: uv run examples/day06/check.py
"""
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 06: read_file and the agent loop")


def returns_within(seconds: float, func, *args):
    """(finished, value): a read that blocks on a FIFO would never finish."""
    box = {}
    worker = threading.Thread(target=lambda: box.update(value=func(*args)), daemon=True)
    worker.start()
    worker.join(seconds)
    return not worker.is_alive(), box.get("value")


def results_of(message: dict) -> list[dict]:
    return [b for b in message["content"] if b.get("type") == "tool_result"]


# --- read_file on real files ---------------------------------------------------------

outside = Path(f"/tmp/kesi-day06-outside-{os.getpid()}.txt")
outside.write_text("outside secret\n")
try:
    files = {"config.py": "DEBUG = True\nPORT = 8000\n", "notes/a.txt": "a\n",
             "latin1.txt": "caf\xe9\n".encode("latin-1"), "crlf.txt": b"x = 1\r\ny = 2\r\n",
             "image.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"}
    with workspace(files) as root:
        (root / "settings").symlink_to(outside)
        os.mkfifo(root / "pipe")

        out, err = kesi.read_file("config.py")
        checks.check("read_file returns the lines, numbered",
                     (out, err) == ("     1\tDEBUG = True\n     2\tPORT = 8000", False), out)

        refused = {name: kesi.read_file(name) for name in ("/etc/passwd", "../etc/passwd", "settings")}
        checks.check("/etc/passwd, ../ and a symlink out of the folder are refused, nothing leaks",
                     all(err and "root:" not in out and "outside secret" not in out for out, err in refused.values()),
                     refused)

        out, err = kesi.read_file(".")
        checks.check("a directory is refused without an absolute path or errno in the message",
                     err and str(root) not in out and "Errno" not in out, out)

        finished, value = returns_within(5, kesi.read_file, "pipe")
        checks.check("a FIFO is refused at once (never opened)", finished and value[1], value)

        out, err = kesi.read_file("latin1.txt")
        checks.check("a Latin-1 file is refused: strict UTF-8", err and "UTF-8" in out, out)
        out, err = kesi.read_file("image.png")
        checks.check("a binary file is refused", err and "binary" in out, out)

        out, err = kesi.read_file("crlf.txt")
        checks.check("CRLF lines are shown without \\r and the line ending is named",
                     not err and out.startswith("     1\tx = 1\n     2\ty = 2") and "CRLF" in out, out)

    with workspace({"long.txt": "".join(f"row {n}\n" for n in range(1, 101))}):
        out, err = kesi.read_file("long.txt", offset=10, limit=3)
        checks.check("offset/limit give a numbered PARTIAL window that says how to go on",
                     not err and out.startswith("    10\trow 10\n    11\trow 11\n    12\trow 12\n")
                     and "PARTIAL" in out and "offset=13" in out, out)
finally:
    outside.unlink()

# --- the agent loop through the mock API -----------------------------------------------

with workspace({"kesi_demo.py": "print('hello from the demo')\n"}) as root, \
        mock_client([reply("Let me read it.", tool_call("read_file", {"file_path": "kesi_demo.py"})),
                     "It prints a greeting."]) as (mock, client):
    history = [{"role": "user", "content": "What does kesi_demo.py do?"}]
    answer = kesi.run_agent(client, history)
    sizes = [len(r["body"]["messages"]) for r in mock.requests]
    checks.check("one question, one read: the requests carry 1, then 3 messages", sizes == [1, 3], sizes)
    checks.check("the final text is the answer", answer.text == "It prints a greeting.", answer)
    assistant = history[1]["content"]
    checks.check("the assistant turn is kept as full blocks (text + tool_use)",
                 [b["type"] for b in assistant] == ["text", "tool_use"], assistant)
    [result] = results_of(history[2])
    checks.check("the tool_result echoes the tool_use id and carries is_error=False",
                 result["tool_use_id"] == assistant[1]["id"] and result["is_error"] is False
                 and "hello from the demo" in result["content"], result)

with workspace({"examples/a.txt": "A points to b.txt\n", "examples/b.txt": "B\n"}) as root, \
        mock_client([reply(None, tool_call("read_file", {"file_path": "examples/a.txt"}),
                           tool_call("read_file", {"file_path": "examples/b.txt"})),
                     "a.txt mentions b.txt."]) as (mock, client):
    history = [{"role": "user", "content": "How are a.txt and b.txt related?"}]
    kesi.run_agent(client, history)
    messages = mock.requests[1]["body"]["messages"]
    checks.check("two calls in one reply: one user message with both results, in order",
                 len(messages) == 3 and [r["is_error"] for r in results_of(messages[2])] == [False, False]
                 and [r["tool_use_id"] for r in results_of(messages[2])]
                 == [b["id"] for b in messages[1]["content"] if b["type"] == "tool_use"], messages[-1])

with workspace() as root, \
        mock_client([reply(None, tool_call("read_file", {"file_path": "/etc/passwd"})),
                     "That file is outside the project, so I cannot read it."]) as (mock, client):
    history = [{"role": "user", "content": "Read /etc/passwd for me"}]
    answer = kesi.run_agent(client, history)
    [result] = results_of(history[2])
    checks.check("a refused read goes back as is_error=True and the loop goes on to an answer",
                 result["is_error"] is True and "root:" not in result["content"] and answer.ok
                 and all(r["status"] == 200 for r in mock.requests), result)

with workspace() as root, \
        mock_client([reply(None, tool_call("fetch_url", {"url": "x"}), tool_call("read_file", {"path": "a"})),
                     "OK."]) as (mock, client):
    history = [{"role": "user", "content": "go"}]
    answer = kesi.run_agent(client, history)
    unknown, bad_args = results_of(history[2])
    checks.check("an unknown tool and wrong arguments become error results, not crashes",
                 unknown["is_error"] and "no tool named fetch_url" in unknown["content"]
                 and bad_args["is_error"] and "wrong arguments" in bad_args["content"] and answer.text == "OK.",
                 history[2])

with workspace({"a.txt": "a\n"}) as root, \
        mock_client([reply("Reading", tool_call("read_file", {"file_path": "a.txt"}), stop_reason="max_tokens")] * 2) \
        as (mock, client):
    history = [{"role": "user", "content": "go"}]
    answer = kesi.run_agent(client, history)        # cut inside a tool call: asked again once with more room
    checks.check("a reply cut off by max_tokens ends the loop and runs no tool",
                 len(mock.requests) == 2 and not any(results_of(m) for m in history if isinstance(m["content"], list))
                 and not answer.ok, history)

sys.exit(checks.finish())
