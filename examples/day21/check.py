# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 21 checks: sessions saved as JSONL, --continue and /resume.

kesi.py runs as a real child process against the mock API, once as a REPL
fed through a pipe and then again with --continue or /resume; the mock's
request log shows whether the earlier conversation came back. Broken and
half-finished session files go through kesi.main in this process.
Run: uv run examples/day21/check.py
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import ROOT, Checks, fresh_state, kesi_subprocess_env, records_of, workspace  # noqa: E402
import kesi                                                           # noqa: E402
from mock_api import MockAPI                                          # noqa: E402

checks = Checks("Day 21: sessions")
NAME_PROMPT = "My name is Along. Please remember it."
NAME_REPLY = "Nice to meet you, Along."


def kesi_run(folder: Path, mock, *args, stdin: str = ""):
    env = kesi_subprocess_env(mock, KESI_SANDBOX="off")
    return subprocess.run([sys.executable, str(ROOT / "kesi.py"), *args], cwd=folder, env=env, input=stdin,
                          capture_output=True, text=True, timeout=60)


def kesi_main(mock, *args) -> tuple[int, str, str]:
    """kesi.main in this process (cheaper than a child process), pointed at the mock."""
    out, err, saved_env = io.StringIO(), io.StringIO(), dict(os.environ)
    os.environ.update(mock.env())
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = kesi.main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        kesi.CLIENT = None
        fresh_state()
    return code, out.getvalue(), err.getvalue()


def sessions_in(folder: Path) -> list[Path]:
    return sorted((records_of(folder) / "sessions").glob("*.jsonl"))


def texts(body: dict) -> list[str]:
    return [kesi.text_of(m["content"]) for m in body["messages"]]


def write_session(folder: Path, name: str, lines: list[str]) -> Path:
    """A session file made by hand (each line signed as KeSi signs it), marked as the most recent one."""
    path = records_of(folder) / "sessions" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    key = kesi.record_key()
    path.write_bytes(b"".join(kesi.record_mac(key, name, line.encode()) + b" " + line.encode() + b"\n"
                              for line in lines))
    newest = time.time() + 60
    os.utime(path, (newest, newest))
    return path


def header(title: str) -> str:
    return json.dumps({"kesi_session": 1, "model": "claude-haiku-4-5", "title": title})


def check_save_and_continue(folder: Path):
    script = [NAME_REPLY, "Your name is Along.", "Still Along."]
    with MockAPI(script) as mock:
        first = kesi_run(folder, mock, stdin=NAME_PROMPT + "\n")
        files = sessions_in(folder)
        checks.check("a REPL conversation (piped stdin) runs and ends cleanly", first.returncode == 0
                     and NAME_REPLY in first.stdout, first.stdout[-800:] + first.stderr[-800:])
        checks.check("it is saved as one JSONL file among KeSi's records, outside the project",
                     len(files) == 1 and not (folder / ".kesi" / "sessions").exists(), files)
        if not files:
            return
        lines = [json.loads(line) for line in kesi.read_records(files[0])[0]]
        lines = [line for line in lines if kesi.CLOCK not in line]      # each save's cache clock line
        checks.check("the file is a header line, then one line per message",
                     lines[0].get("kesi_session") == 1 and lines[0].get("title") == NAME_PROMPT
                     and [m["role"] for m in lines[1:]] == ["user", "assistant"], lines)

        second = kesi_run(folder, mock, "--continue", "-p", "What is my name?")
        sent = texts(mock.requests[1]["body"])
        checks.check("--continue sends the earlier conversation with the new prompt",
                     sent == [NAME_PROMPT, NAME_REPLY, "What is my name?"], sent)
        checks.check("-p --continue prints only the answer on stdout",
                     second.returncode == 0 and second.stdout.strip() == "Your name is Along.",
                     second.stdout + second.stderr[-800:])
        checks.check("the resume notice goes to stderr", "Resumed" in second.stderr, second.stderr[-800:])
        checks.check("the continued conversation is saved into the same file",
                     sessions_in(folder) == files
                     and sum(kesi.CLOCK not in line for line in files[0].read_text().splitlines()) == 5)

        third = kesi_run(folder, mock, stdin="/resume\n/resume 1\nAnd now?\n")
        sent = texts(mock.requests[2]["body"])
        checks.check("/resume lists the saved sessions with their titles",
                     f"1. {files[0].stem}" in third.stdout and NAME_PROMPT[:40] in third.stdout, third.stdout[-800:])
        checks.check("/resume 1 restores it: the next request holds the whole conversation",
                     sent[:4] == [NAME_PROMPT, NAME_REPLY, "What is my name?", "Your name is Along."]
                     and sent[-1] == "And now?", sent)
        checks.check("every request built from a saved session is accepted",
                     all(r["status"] == 200 for r in mock.requests), [r["status"] for r in mock.requests])


def check_corrupt_session(folder: Path):
    path = write_session(folder, "20990101-000000-1.jsonl",
                         [header("broken"), json.dumps({"role": "user", "content": "hi"}), "{not json"])
    with MockAPI(["the older one"]) as mock:
        try:
            code, _, err = kesi_main(mock, "--continue", "-p", "go on")
        except Exception as exc:              # what a traceback would have been
            code, err = None, repr(exc)
        checks.check("a corrupt session gives a readable error, not a traceback",
                     "Could not resume" in err and "line 3 is not JSON" in err, err[-800:])
        sent = texts(mock.requests[0]["body"]) if mock.requests else []
        checks.check("--continue then takes the newest session that loads, and says which",
                     code == 0 and sent[:2] == [NAME_PROMPT, NAME_REPLY] and "Resumed" in err, (code, sent))
    try:
        kesi.read_session(path)
        raised = None
    except ValueError as exc:
        raised = str(exc)
    checks.check("read_session raises ValueError naming the file and line",
                 raised is not None and path.name in raised and "line 3" in raised, raised)
    path.unlink()


def check_dangling_tool_use(folder: Path):
    use = {"type": "tool_use", "id": "toolu_crashed_1", "name": "read_file", "input": {"file_path": "a.txt"}}
    write_session(folder, "20990101-000001-1.jsonl",
                  [header("crashed"), json.dumps({"role": "user", "content": "Read a.txt"}),
                   json.dumps({"role": "assistant", "content": [{"type": "text", "text": "Reading it."}, use]})])
    with MockAPI(["It was interrupted, let me look again."]) as mock:
        code, out, err = kesi_main(mock, "--continue", "-p", "go on")
        body = mock.requests[0]["body"] if mock.requests else {"messages": []}
        results = [b for m in body["messages"] if isinstance(m["content"], list)
                   for b in m["content"] if b.get("type") == "tool_result"]
        checks.check("a session ending in an unanswered tool_use is sealed on load and accepted",
                     code == 0 and mock.requests and mock.requests[0]["status"] == 200
                     and [r["tool_use_id"] for r in results] == ["toolu_crashed_1"], err[-800:])
        checks.check("the new prompt follows the sealed round", texts(body)[-1] == "go on", texts(body))
        checks.check("the seal says the tool's outcome is unknown",
                     results and results[0]["is_error"] and "unknown" in results[0]["content"], results)


def check_nothing_to_continue():
    with workspace(), MockAPI() as mock:
        code, _, err = kesi_main(mock, "--continue", "-p", "hi")
        checks.check("--continue with no saved session is a usage error",
                     code == 2 and "no saved session" in err and not mock.requests, err)


with workspace({"a.txt": "alpha\n"}) as project:
    check_save_and_continue(project)
    check_corrupt_session(project)
    check_dangling_tool_use(project)
check_nothing_to_continue()
sys.exit(checks.finish())
