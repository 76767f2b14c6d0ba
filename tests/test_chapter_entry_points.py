"""The chapter entry points a reader runs by hand: examples/day12/mock.py and examples/day15/profile.py."""
import os
import socket
import subprocess
import sys
from pathlib import Path

import anthropic
import pytest

import kesi

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def profile(*args, cwd):
    return profiles([*args], cwd=cwd)[0]


def profiles(*runs, cwd) -> list[subprocess.CompletedProcess]:
    """examples/day15/profile.py once per argument list, side by side (each starts a Python and the SDK)."""
    procs = [subprocess.Popen([sys.executable, str(ROOT / "examples/day15/profile.py"), *args], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
             for args in runs]
    try:
        answers = [proc.communicate(timeout=60) for proc in procs]
        return [subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
                for proc, (out, err) in zip(procs, answers)]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill(), proc.wait()


def test_day12_mock_serves_the_mode_named_in_MOCK_MODE():
    port = free_port()
    env = {**os.environ, "MOCK_MODE": "429", "MOCK_PORT": str(port)}
    server = subprocess.Popen([sys.executable, str(ROOT / "examples/day12/mock.py")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert f"127.0.0.1:{port}" in server.stdout.readline()       # up and saying where
        client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{port}", api_key="test-key", max_retries=0)
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(model="claude-haiku-4-5", max_tokens=10,
                                   messages=[{"role": "user", "content": "hi"}])
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_day12_mock_refuses_an_unknown_mode_with_the_list():
    proc = subprocess.run([sys.executable, str(ROOT / "examples/day12/mock.py")], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MOCK_MODE": "nonsense"})
    assert proc.returncode == 2 and "429" in proc.stderr


def test_day15_profile_prints_the_seatbelt_profile_on_any_platform(tmp_path):
    proc = profile("--seatbelt", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("(version 1)")
    assert "(deny network*)" in proc.stdout and f"BASE_DIR={tmp_path.resolve()}" in proc.stderr


@pytest.mark.skipif(kesi.probe_sandbox() != "bubblewrap", reason="no usable bubblewrap here")
def test_day15_profile_shows_and_tries_the_real_bwrap_sandbox(tmp_path):
    (tmp_path / ".env").write_text("API_TOKEN=sk-profile-canary\n")
    shown, tried = profiles([], ["--try", "echo x > $HOME/kesi-profile-probe; cat .env"], cwd=tmp_path)
    assert shown.returncode == 0 and "--unshare-net" in shown.stdout and "--cap-drop ALL" in shown.stdout
    assert tried.returncode == 1 and "sk-profile-canary" not in tried.stdout + tried.stderr
    assert "Permission denied" in tried.stderr
    assert not (Path.home() / "kesi-profile-probe").exists()      # home is a throwaway tmpfs inside
