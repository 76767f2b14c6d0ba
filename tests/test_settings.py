"""Settings: read and checked once at start-up by read_settings, applied by apply_settings.

Bad values are tried through real `kesi.py` child processes: a clear message
naming the setting and what it accepts, exit code 2, no traceback. The rest
sets settings through read_settings/apply_settings, never by poking globals.
"""
import json
import subprocess
import sys

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call

KESI = checklib.ROOT / "kesi.py"

BAD = {
    "KESI_MAX_RETRIES": ("-1", "at least 0"),
    "KESI_MAX_TURNS": ("-5", "at least 1"),
    "KESI_MAX_TOKENS": ("0", "at least 1"),
    "KESI_COMMAND_TIMEOUT": ("0", "at least 1"),
    "KESI_CONTEXT_WINDOW": ("0", "at least 10000"),
    "KESI_PRICES": ("{bad", '"input"'),
    "KESI_MODEL": ("", "model id"),
    "KESI_SANDBOX": ("weird", "auto or off"),
    "KESI_NO_SANDBOX": ("yes", "1 (sandbox off) or 0"),
    "KESI_PASS_ENV": ("A B", "variable names separated by commas"),
}


@pytest.fixture
def restore_settings():
    """Whatever a test applies, the next test starts from the defaults again."""
    yield
    kesi.apply_settings(kesi.Settings())


def test_bad_settings_stop_a_real_kesi_with_a_clear_message(tmp_path):
    """All at once (one child per setting, in parallel): each names itself and what it accepts."""
    procs, workspace = {}, tmp_path / "ws"       # KeSi's own folders may not lie inside the workspace
    workspace.mkdir()
    for name, (value, _) in BAD.items():
        env = checklib.kesi_subprocess_env(ANTHROPIC_API_KEY="test-key", ANTHROPIC_BASE_URL="http://127.0.0.1:9",
                                           XDG_CONFIG_HOME=str(tmp_path / "no-config"), **{name: value})
        procs[name] = subprocess.Popen([sys.executable, str(KESI), "-p", "hello"], cwd=workspace, env=env,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (name, out, err)
        assert out == "" and "Traceback" not in err, (name, err)
        assert err.startswith(f"KeSi: {name} ") and BAD[name][1] in err, (name, err)


@pytest.mark.parametrize("name", sorted(BAD))
def test_read_settings_rejects_each_bad_value(name):
    with pytest.raises(kesi.SettingError) as raised:
        kesi.read_settings({name: BAD[name][0]})
    assert name in str(raised.value) and BAD[name][1] in str(raised.value)


def test_good_values_become_the_module_settings(restore_settings):
    settings = kesi.read_settings({
        "KESI_MODEL": "claude-sonnet-4-5", "KESI_MAX_TOKENS": "1000", "KESI_MAX_TURNS": " 7 ",
        "KESI_CONTEXT_WINDOW": "50000", "KESI_COMMAND_TIMEOUT": "30", "KESI_MAX_RETRIES": "0",
        "KESI_PRICES": '{"input": 2, "output": 10, "cache_write": 2.5, "cache_read": 0.2}',
        "KESI_PASS_ENV": "MY_TOOL_HOME, OTHER"})
    kesi.apply_settings(settings)
    assert (kesi.MODEL, kesi.MAX_TOKENS, kesi.MAX_TURNS, kesi.CONTEXT_WINDOW, kesi.COMMAND_TIMEOUT,
            kesi.MAX_RETRIES) == ("claude-sonnet-4-5", 1000, 7, 50000, 30, 0)
    assert kesi.price_for("claude-haiku-4-5")["output"] == 10
    assert kesi.PASS_ENV == {"MY_TOOL_HOME", "OTHER"}


def test_nothing_set_means_the_defaults():
    assert kesi.read_settings({}) == kesi.Settings()
    assert kesi.Settings().max_turns == 20 and kesi.Settings().model == "claude-haiku-4-5"


@pytest.mark.parametrize("environ, disabled", [
    ({}, False), ({"KESI_SANDBOX": "auto"}, False), ({"KESI_SANDBOX": "OFF"}, True),
    ({"KESI_SANDBOX": "false"}, True), ({"KESI_NO_SANDBOX": "1"}, True), ({"KESI_NO_SANDBOX": "0"}, False),
])
def test_sandbox_setting_and_the_series_no_sandbox(environ, disabled, restore_settings, ws):
    kesi.apply_settings(kesi.read_settings(environ))
    assert kesi.SANDBOX_DISABLED is disabled
    assert kesi.read_settings(environ).sandbox == ("off" if disabled else "auto")
    if disabled:
        assert kesi.sandbox_kind() is None and kesi.sandbox_state() == "off"


def test_user_file_is_read_and_the_shell_wins(tmp_path):
    user = tmp_path / "env"
    user.write_text("KESI_MAX_TURNS=9\nKESI_MODEL='claude-opus-4-5'\nexport ANTHROPIC_BASE_URL=http://x.test\n")
    settings = kesi.read_settings({"KESI_MODEL": "claude-sonnet-4-5"}, user_file=user)
    assert (settings.max_turns, settings.model, settings.base_url) == (9, "claude-sonnet-4-5", "http://x.test")


def test_a_bad_value_in_the_user_file_is_reported_too(tmp_path):
    user = tmp_path / "env"
    user.write_text("KESI_MAX_TURNS=lots\n")
    with pytest.raises(kesi.SettingError, match="KESI_MAX_TURNS must be a whole number"):
        kesi.read_settings({}, user_file=user)


def test_user_env_file_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert kesi.user_env_file() == tmp_path / "kesi" / "env"
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert kesi.user_env_file() == kesi.Path.home() / ".config" / "kesi" / "env"


def test_env_files_are_parsed_without_touching_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("KESI_TEST_NEW", raising=False)
    env_file = tmp_path / ".env"
    env_file.write_text("# comment\nKESI_TEST_NEW=1\nexport KESI_TEST_QUOTED=\"two words\"\nnot a line\n"
                        "EMPTY=\n")
    assert kesi.read_env_file(env_file) == {"KESI_TEST_NEW": "1", "KESI_TEST_QUOTED": "two words", "EMPTY": ""}
    assert "KESI_TEST_NEW" not in kesi.os.environ
    assert kesi.read_env_file(tmp_path / "missing") == {}


def test_a_fifo_or_device_as_env_file_is_not_read(tmp_path):
    fifo = tmp_path / ".env"
    kesi.os.mkfifo(fifo)                   # opening it for reading would block forever
    assert kesi.read_env_file(fifo) == {}
    assert kesi.read_env_file(kesi.Path("/dev/zero")) == {}


# --- .kesi/settings.json is the project's: a sandboxed command may make it anything ------------------------

PLANTS = {"link to /dev/zero": ("ln -s /dev/zero .kesi/settings.json", "Too many levels of symbolic links"),
          "fifo": ("mkfifo .kesi/settings.json", "not a regular file"),
          "sparse 50 GB": ("truncate -s 50G .kesi/settings.json", "over 1,000,000 bytes")}


def kesi_in(folder, mock, *args) -> subprocess.CompletedProcess:
    """kesi.py -p in folder, its address space capped: a file read whole must not take this machine's memory."""
    import resource
    cap = lambda: resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))      # noqa: E731
    return subprocess.run([sys.executable, str(KESI), "-p", *args], cwd=folder, capture_output=True, text=True,
                          env=checklib.kesi_subprocess_env(mock), timeout=120, stdin=subprocess.DEVNULL,
                          preexec_fn=cap)


@pytest.mark.parametrize("plant", PLANTS, ids=list(PLANTS))
def test_a_project_settings_file_a_command_made_a_device_fifo_or_giant_is_ignored_once(box, plant):
    command, why = PLANTS[plant]
    turn = [reply(tool_call("run_command", {"command": f"mkdir -p .kesi && {command}"})),
            reply(tool_call("run_command", {"command": "echo still here"})), reply("done")]
    with MockAPI(turn) as mock:
        proc = kesi_in(box, mock, "go", "--permission-mode", "auto")
    assert proc.returncode == 0 and len(mock.requests) == 3, proc.stderr[-2000:]
    assert "still here" in json.dumps(mock.requests[2]["body"]["messages"])
    assert proc.stderr.count(f".kesi/settings.json: {why}") == 1, proc.stderr[-2000:]       # said once
    with MockAPI(["hello again"]) as mock:                                   # and a new start there works
        proc = kesi_in(box, mock, "hi")
    assert proc.returncode == 0 and "hello again" in proc.stdout and len(mock.requests) == 1, proc.stderr[-2000:]


def test_your_settings_file_that_is_not_valid_json_is_said_to_be_ignored(ws, user_settings, notices):
    """rt37c 32: a trailing comma made ~/.config/kesi/settings.json silently ignored, and with it your deny rules."""
    folder = user_settings({})
    (folder / "kesi" / "settings.json").write_text('{"permissions": {"deny": ["Bash(git push:*)"],}}')
    assert kesi.permission_rules() == [] or all(rule.source != "user settings" for rule in kesi.permission_rules())
    shown = notices.getvalue()
    assert f"(ignored {folder / 'kesi' / 'settings.json'}: not valid JSON (" in shown, shown
    assert "its rules and settings do not count until it is fixed" in shown, shown
