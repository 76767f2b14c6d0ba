"""Runs the hypothesis property tests in tests/properties_hypothesis.py.

hypothesis is not a KeSi dependency, and the suite's fixed command
(`uv run --with-requirements kesi.py --with pytest pytest -q`) does not
install it. So: when hypothesis is importable, the tests are imported here
and collected as usual; otherwise one test runs that file in a child
`uv run --with hypothesis ...` and requires it to pass with tests counted.
"""
import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROPERTIES = ROOT / "tests" / "properties_hypothesis.py"

try:
    import hypothesis  # noqa: F401
except ImportError:
    hypothesis = None

if hypothesis is not None:
    from properties_hypothesis import *  # noqa: E402,F401,F403  (collected as part of this file)
else:
    def test_properties_in_a_child_with_hypothesis():
        uv = shutil.which("uv")
        assert uv, "uv is needed to run the property tests without hypothesis installed"
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        proc = subprocess.run(
            [uv, "run", "--with", "hypothesis", "--with", "pytest", "--with-requirements",
             str(ROOT / "kesi.py"), "pytest", "-q", "-p", "no:cacheprovider", str(PROPERTIES)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        report = proc.stdout[-6000:] + proc.stderr[-3000:]
        assert proc.returncode == 0, report
        passed = re.search(r"(\d+) passed", proc.stdout)
        assert passed and int(passed.group(1)) > 0, report
        assert " failed" not in proc.stdout and " error" not in proc.stdout, report
