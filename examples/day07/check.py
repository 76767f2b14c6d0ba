# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 07 checks: list_files and glob, the ignore list, and one dispatch table.

A project folder like the chapter's (Python files, .env, .git, __pycache__)
is built for real; a symlink to a file outside must fail on every tool.
Then the model's glob and list_files calls run through the agent loop and
the local mock API. Run: uv run examples/day07/check.py
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 07: list_files, glob and the ignore list")

PROJECT = {
    "kesi.py": "print('kesi')\n", "proxy.py": "\n", "prefill.py": "\n", "probe.py": "\n",
    "examples/demo.py": "\n", "examples/a.txt": "a\n", "README.md": "# KeSi\n", "LICENSE": "MIT\n",
    ".gitignore": ".env\n", ".python-version": "3.11\n", ".env": "ANTHROPIC_API_KEY=sk-secret\n",
    ".env.example": "ANTHROPIC_API_KEY=\n", ".git/HEAD": "ref: refs/heads/main\n",
    "__pycache__/kesi.cpython-311.pyc": b"\x00pyc", "node_modules/left-pad/index.js": "module.exports = 1\n",
    "captured/request-1.json": "{}\n",
}

outside = Path(f"/tmp/kesi-day07-outside-{os.getpid()}.txt")
outside.write_text("outside secret\n")
try:
    with workspace(PROJECT) as root:
        (root / "settings").symlink_to(outside)

        out, err = kesi.list_files()
        shown = out.splitlines()
        checks.check("list_files: one level, sorted, folders end with /",
                     not err and shown == sorted(shown) and "examples/" in shown and "kesi.py" in shown, out)
        checks.check("list_files hides .env, .env.example, .git/, __pycache__/ and node_modules/",
                     not {".env", ".env.example", ".git/", "__pycache__/", "node_modules/"} & set(shown), out)
        checks.check("list_files still shows ordinary dotfiles such as .gitignore",
                     ".gitignore" in shown and ".python-version" in shown, out)

        out, err = kesi.list_files("..")
        checks.check("list_files('..') is refused", err, out)

        out, err = kesi.glob_files("**/*.py")
        checks.check("glob **/*.py finds the five Python files and nothing hidden",
                     out.splitlines() == ["examples/demo.py", "kesi.py", "prefill.py", "probe.py", "proxy.py"], out)

        out, err = kesi.read_file(".env")
        checks.check("read_file('.env') is refused and the key does not leak", err and "sk-secret" not in out, out)

        link_results = {"read_file": kesi.read_file("settings"), "list_files": kesi.list_files("settings"),
                        "glob": kesi.glob_files("settings"), "grep": kesi.grep("secret", "settings")}
        checks.check("a symlink to a file outside fails on every tool",
                     all("outside secret" not in out for out, _ in link_results.values())
                     and all(err for name, (_, err) in link_results.items() if name != "glob")
                     and link_results["glob"][0].startswith("No accessible files")
                     and "settings" not in kesi.list_files()[0], link_results)

        bad = ["..", "../*", "~/*", "/etc/*", "C:\\Windows\\*", "..\\..\\etc\\*", ".", ""]
        refused = {p: kesi.glob_files(p) for p in bad}
        checks.check("glob refuses .., ~, absolute, Windows drives and ..\\ segments, '.' and blank",
                     all(err for _, err in refused.values()), refused)

    with workspace({"version..txt": "1\n"}):
        checks.check("a '..' inside a name is not a segment: glob version..txt works",
                     kesi.glob_files("version..txt") == ("version..txt", False))

    with workspace({f"data/f{n:03}.csv": "x\n" for n in range(230)}):
        out, _ = kesi.list_files("data")
        lines = out.splitlines()
        checks.check("more than 200 entries: the first 200 plus a count",
                     len(lines) == 201 and "230" in lines[-1], lines[-1])
        out, _ = kesi.glob_files("data/*.csv")
        checks.check("glob uses the same cap and count", len(out.splitlines()) == 201 and "230" in out.splitlines()[-1])
finally:
    outside.unlink()

# --- through the agent loop -----------------------------------------------------------

checks.check("one name->function table drives dispatch",
             kesi.TOOL_FUNCS["glob"] is kesi.glob_files and kesi.TOOL_FUNCS["list_files"] is kesi.list_files
             and {t["name"] for t in kesi.TOOLS} == set(kesi.TOOL_FUNCS))

with workspace(PROJECT) as root, \
        mock_client([reply(None, tool_call("glob", {"pattern": "**/*.py"})),
                     reply(None, tool_call("list_files", {"path": ".."})),
                     reply(None, tool_call("list_files", {})),
                     "Five Python files."]) as (mock, client):
    history = [{"role": "user", "content": "Which Python files are in this project?"}]
    answer = kesi.run_agent(client, history)
    results = [b for m in history if m["role"] == "user" and isinstance(m["content"], list) for b in m["content"]]
    checks.check("the model's glob call returns the five files",
                 results[0]["is_error"] is False and results[0]["content"].count(".py") == 5, results[0])
    checks.check("list_files('..') goes back as an error; the next call with {} works",
                 results[1]["is_error"] is True and results[2]["is_error"] is False
                 and "kesi.py" in results[2]["content"] and answer.text == "Five Python files.", results[1:])
    checks.check("every request was one the real API accepts", all(r["status"] == 200 for r in mock.requests))

sys.exit(checks.finish())
