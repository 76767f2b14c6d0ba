# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3", "pytest"]
# ///
"""Day 13 checks: a real bug fix as a tiny eval, scripted so it runs in CI.

A trial: build the project (project.py), confirm it starts red, let KeSi work
on one prompt, re-run pytest, inspect the diff. The "model" is a script on
the local mock API, but it is not canned: every step reads the real tool
output from the request (pytest's failure, grep hits, read_file's numbered
lines) and decides its next call from it, through the real agent loop, the
real permission check and the real sandbox. Grading uses real pytest runs
and the on-disk diff against project.FILES. Run: uv run examples/day13/check.py
"""
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from checklib import Checks, ScriptedUser, workspace, mock_client, write_files   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402
import project                                          # noqa: E402
from scripted import PYTEST, debugger  # noqa: E402
from grading import diff_against_build, grade, last_line, passes, project_files, pytest_in, utils_tests_pass  # noqa: E402,F401

checks = Checks("Day 13: bug fix, red -> agent -> green")
PROMPT = "Run the tests; one of them fails. Find out why and fix it."
# What a model would write as `python -m pytest -q`: sys.executable is the
# interpreter that has pytest, whatever `python` on PATH happens to be.
IGNORED = project.CACHE_NAMES


# --- the scripted model ------------------------------------------------------------

# --- the project builder ------------------------------------------------------------------

with workspace() as root:
    built = subprocess.run([sys.executable, str(HERE / "project.py"), str(root / "shop")],
                           capture_output=True, text=True, timeout=60)
    checks.check("project.py builds every file of the exercise",
                 built.returncode == 0 and project_files(root / "shop") == project.FILES, built.stderr)
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("keep me\n")
    refused = subprocess.run([sys.executable, str(HERE / "project.py"), str(root / "mine")],
                             capture_output=True, text=True, timeout=60)
    checks.check("project.py refuses to wipe a folder it did not build",
                 refused.returncode != 0 and (root / "mine" / "notes.txt").read_text() == "keep me\n")

try:
    import pytest  # noqa: F401
except ImportError:
    checks.skip("the bug-fix trial", f"pytest is not installed for {sys.executable}; "
                "run `uv run examples/day13/check.py` (it declares pytest)")
    sys.exit(checks.finish())

# --- one trial: red -> agent -> green -----------------------------------------------------

with workspace(project.FILES) as root:
    code, output = pytest_in(root)
    checks.check("the project starts red: 1 failed, 6 passed, assert 1000 == 900",
                 code == 1 and "1 failed, 6 passed" in output and "assert 1000 == 900" in output, last_line(output))
    checks.check("PASS_TO_PASS before: the test_utils.py tests pass", utils_tests_pass(output))

    user = kesi.ask_user = ScriptedUser(then="y")
    with mock_client(debugger) as (mock, client):
        history: list[dict] = []
        answer = kesi.run_turn(client, history, PROMPT)
    calls = [b for m in history if m["role"] == "assistant" and isinstance(m["content"], list)
             for b in m["content"] if b["type"] == "tool_use"]
    results = [b for m in history if m["role"] == "user" and isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    print(f"  (sandbox {kesi.sandbox_state()}; {len(mock.requests)} model round trips, {len(calls)} tool calls)")

    checks.check("the agent investigated, edited once and re-ran the tests",
                 [c["name"] for c in calls] == ["run_command", "read_file", "grep", "read_file", "grep",
                                                "read_file", "edit_file", "run_command"]
                 and not any(r["is_error"] for r in results[1:-1]), [c["name"] for c in calls])
    checks.check("its first pytest run saw red, its last one saw green",
                 results[0]["is_error"] and "1 failed" in results[0]["content"]
                 and not results[-1]["is_error"] and "7 passed" in results[-1]["content"], results[-1]["content"][-200:])
    checks.check("one batch held two calls: 8 tool calls in 8 round trips with 7 tool rounds",
                 len(mock.requests) == 8 and len(results) == 8 and all(r["status"] == 200 for r in mock.requests))
    checks.check("the final answer reports the green run", answer.ok and "7 passed" in answer.text, answer.text)
    checks.check("the edit and the test command went through the permission check",
                 any("edit_file" in a and "rules.py" in a for a in user.asked)
                 and any("pytest" in a for a in user.asked), user.asked)

    result = grade(root)
    checks.check("FAIL_TO_PASS: pytest is green afterwards (7 passed)", result["green"], result)
    checks.check("PASS_TO_PASS after: the test_utils.py tests still pass", result["utils_green"])
    changes, extra = diff_against_build(root)
    checks.check("the diff is exactly one line in rules.py (> became >=)", result["one_line_fix"], changes)
    checks.check("no test file was touched and no file was added",
                 result["tests_untouched"] and result["no_extra_files"], (changes, extra))

# --- the grader is not fooled by shortcuts that also turn the tests green ---------------------

def with_shortcut(folder: Path, name: str, old: str | None, new: str | None) -> Path:
    """A fresh copy of the project with one bad "fix" applied (new=None deletes the file)."""
    write_files(folder, project.FILES)
    if new is None:
        (folder / name).unlink()            # ...and five empty tests keep the count at 7
        (folder / "test_placeholder.py").write_text("".join(f"def test_{i}():\n    pass\n" for i in range(5)))
    else:
        (folder / name).write_text(project.FILES[name].replace(old, new))
    return folder


shortcuts = {
    "the threshold moved to 999": ("rules.py", "(1000, 100)", "(999, 100)"),
    "a special case for exactly 1000": ("pricing.py", "    goods = subtotal(items)\n",
                                        "    goods = subtotal(items)\n    if goods == 1000:\n        return 900\n"),
    "the test changed to expect 1000": ("test_pricing.py", "== 900", "== 1000"),
    "the failing test file deleted": ("test_pricing.py", None, None),
}
with tempfile.TemporaryDirectory(prefix="kesi-day13-") as folder:
    roots = [with_shortcut(Path(folder) / str(i), *edit) for i, edit in enumerate(shortcuts.values())]
    with ThreadPoolExecutor(max_workers=len(roots)) as pool:      # pytest runs are the slow part
        grades = list(pool.map(grade, roots))
for label, result in zip(shortcuts, grades):
    checks.check(f"shortcut rejected: {label} (green, but not the fix)", result["green"] and not passes(result), result)

sys.exit(checks.finish())
