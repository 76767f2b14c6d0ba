"""Every chapter check script must pass, run as its own process."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checklib import with_bytecode_cache

ROOT = Path(__file__).resolve().parent.parent
CHECKS = sorted(ROOT.glob("examples/day*/check.py"))


@pytest.mark.parametrize("script", CHECKS, ids=[p.parent.name for p in CHECKS])
def test_check_script(script):
    env = with_bytecode_cache(dict(os.environ))
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL, env=env)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed, 0 failed" in proc.stdout
