"""Grading a day 13 trial, shared by check.py (scripted) and demo.py (real model).

A run passes when pytest goes green (FAIL_TO_PASS), the distractor's tests
stay green (PASS_TO_PASS), and the only change on disk is the one expected
line in rules.py: no test edited, no file added.
"""
import difflib
import re
import subprocess
import sys
from pathlib import Path

import project

IGNORED = project.CACHE_NAMES


def pytest_in(root: Path) -> tuple[int, str]:
    """A grading run; -rA lists every test's outcome for the PASS_TO_PASS check."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider"],
                          cwd=root, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    return proc.returncode, proc.stdout


def utils_tests_pass(output: str) -> bool:
    """PASS_TO_PASS: both tests of the distractor module passed in this run."""
    return len(re.findall(r"^PASSED test_utils\.py::", output, re.M)) == 2


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1] if output.strip() else ""


def project_files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): p.read_text(encoding="utf-8", errors="replace")
            for p in root.rglob("*") if p.is_file() and not IGNORED & set(p.relative_to(root).parts)}


def diff_against_build(root: Path) -> tuple[dict[str, list[str]], list[str]]:
    """({file: changed lines as '-old' / '+new'}, files that were not in the build)."""
    now = project_files(root)
    changes = {}
    for name, original in project.FILES.items():
        lines = difflib.unified_diff(original.splitlines(), now.get(name, "").splitlines(), lineterm="", n=0)
        changed = [x for x in lines if x[:1] in "+-" and not x.startswith(("+++", "---"))]
        if changed or name not in now:
            changes[name] = changed
    return changes, sorted(set(now) - set(project.FILES))


def grade(root: Path) -> dict:
    """The acceptance rule: green, the one expected line, tests untouched, nothing extra."""
    code, output = pytest_in(root)
    changes, extra = diff_against_build(root)
    return {"green": code == 0 and "7 passed" in output, "utils_green": utils_tests_pass(output),
            "one_line_fix": changes == {"rules.py": [f"-{project.BUGGY_LINE}", f"+{project.FIXED_LINE}"]},
            "tests_untouched": not set(changes) & set(project.TEST_FILES),
            "no_extra_files": not extra}


def passes(result: dict) -> bool:
    return all(result.values())


