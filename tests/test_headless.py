"""Headless mode (-p) as scripts and CI use it: real kesi.py child processes
against the mock API. stdout carries only the answer; errors and progress go
to stderr; piped input is joined to the prompt."""
import json
import subprocess
import sys

import kesi
from checklib import ROOT, kesi_subprocess_env
from mock_api import MockAPI, error, reply, tool_call

KESI = str(ROOT / "kesi.py")


def run(cwd, *args, mock=None, stdin="", **env):
    return subprocess.run([sys.executable, KESI, *args], cwd=cwd, input=stdin, capture_output=True, text=True,
                          timeout=120, env=kesi_subprocess_env(mock, KESI_SANDBOX="off", **env))


def first_prompt(mock) -> str:
    return kesi.text_of(mock.requests[0]["body"]["messages"][0]["content"])


# --- defects: where errors go, piped input, --continue --------------------------------------

def test_an_error_goes_to_stderr_and_stdout_stays_empty(tmp_path):
    with MockAPI([error(400, "prompt is too long: 250000 tokens > 200000 maximum")]) as mock:
        proc = run(tmp_path, "-p", "hi", mock=mock)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "prompt is too long" in proc.stderr and "Traceback" not in proc.stderr


def test_piped_input_is_joined_to_the_prompt(tmp_path):
    log = "ERROR db: connection refused\nERROR db: retry 3 failed\n"
    with MockAPI(["The database is down."]) as mock:
        proc = run(tmp_path, "-p", "explain this log", mock=mock, stdin=log)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "The database is down.\n"
    assert first_prompt(mock) == "explain this log\n\n" + log.strip()


def test_continue_without_a_saved_session_fails_before_the_banner(tmp_path):
    for args in (["-c"], ["-c", "-p", "go on"]):
        with MockAPI() as mock:
            proc = run(tmp_path, *args, mock=mock)
        assert proc.returncode == 2
        assert "no saved session" in proc.stderr
        assert proc.stdout == "" and kesi.BANNER not in proc.stderr
        assert mock.requests == []
