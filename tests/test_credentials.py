"""Which credential KeSi sends: real kesi.py children, the real SDK, the mock's
record of the headers that arrived."""
import subprocess
import sys

import pytest

import checklib
import kesi
from mock_api import MockAPI
from ptyterm import Terminal

KESI = checklib.ROOT / "kesi.py"
BOTH = {"ANTHROPIC_API_KEY": "sk-ant-console-key", "ANTHROPIC_AUTH_TOKEN": "gateway-token"}
SAID = "ANTHROPIC_AUTH_TOKEN (Authorization: Bearer); ANTHROPIC_API_KEY is set too and not used"


def child_env(mock, tmp_path, **extra) -> dict:
    return checklib.kesi_subprocess_env(ANTHROPIC_BASE_URL=mock.url, KESI_SANDBOX="off",
                                        XDG_CONFIG_HOME=str(tmp_path / "config"), **extra)


def workspace(tmp_path):
    """A project folder beside the user's config: KeSi refuses one that holds its own folders."""
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def only_the_token_arrived(mock) -> None:
    headers = [{k.lower(): v for k, v in r["headers"].items()} for r in mock.requests]
    assert headers and all(h.get("authorization") == "Bearer gateway-token" for h in headers), headers
    assert all("x-api-key" not in h for h in headers)
    assert "sk-ant-console-key" not in str(headers)


def test_both_credentials_in_a_headless_run_send_the_token_and_say_so(tmp_path):
    with MockAPI(["the answer"]) as mock:
        proc = subprocess.run([sys.executable, str(KESI), "-p", "hi"], cwd=workspace(tmp_path),
                              capture_output=True, text=True, timeout=120, env=child_env(mock, tmp_path, **BOTH))
    assert proc.returncode == 0 and proc.stdout == "the answer\n", proc.stderr
    assert proc.stderr.count(SAID) == 1 and "sk-ant-console-key" not in proc.stderr
    only_the_token_arrived(mock)


def test_both_credentials_at_the_repl_send_the_token_and_say_so(tmp_path):
    with MockAPI(["first answer"]) as mock:
        env = child_env(mock, tmp_path, TERM="dumb", **BOTH)
        with Terminal([sys.executable, KESI], workspace(tmp_path), env) as term:
            term.wait_for(SAID, "you > ")
            term.type(b"hello\r")
            term.wait_for("first answer", "you > ")
            term.type(b"/exit\r")
            assert term.proc.wait(timeout=30) == 0
    assert term.seen.count(SAID) == 1 and "sk-ant-console-key" not in term.seen
    only_the_token_arrived(mock)


@pytest.mark.parametrize("names, sent", [
    ({"ANTHROPIC_API_KEY": "k"}, ("k", None)),
    ({"ANTHROPIC_AUTH_TOKEN": "t"}, (None, "t")),
    ({"ANTHROPIC_API_KEY": "k", "ANTHROPIC_AUTH_TOKEN": "t"}, (None, "t")),
])
def test_one_credential_is_chosen_by_the_documented_precedence(names, sent):
    settings = kesi.read_settings(names)
    assert (settings.api_key, settings.auth_token) == sent
    assert settings.unused_key == (len(names) == 2)
