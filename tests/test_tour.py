"""The scripted tour (examples/tour/tour.py): KeSi at a real pty fixes the day 13 bug end to end."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_tour_fixes_the_bug_at_a_real_terminal_and_writes_a_readable_transcript(tmp_path):
    out = tmp_path / "transcript.txt"
    proc = subprocess.run([sys.executable, str(ROOT / "examples/tour/tour.py"), "--out", str(out)],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = out.read_text()
    assert "\x1b" not in text and "\r" not in text                      # readable as plain text
    assert "permissions: auto" in text and "Allow? [" not in text        # auto mode: the sandbox is the boundary
    assert text.count("[tool] run_command") == 2 and "[tool] edit_file" in text
    assert "x 1 failed, 6 passed" in text and "> 7 passed" in text
    assert "old_string='        if amount > threshold:', new_string='        if amount >= threshold:'" in text
    assert "you > /cost" in text and "you > /exit" in text               # back at the prompt, then out
