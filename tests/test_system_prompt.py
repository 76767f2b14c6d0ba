"""The system prompt: fixed rules, the environment block, and project memory
(AGENTS.md / CLAUDE.md). Requests go through the real SDK to the mock API."""
import datetime
import os
import platform
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import checklib
import kesi
from mock_api import reply

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def sandbox(monkeypatch):
    """set(kind): pretend the sandbox probe found kind ('bubblewrap', 'seatbelt' or None)."""
    return lambda kind: monkeypatch.setattr(kesi, "sandbox_kind", lambda: kind)


def sandbox_lines_in(text: str) -> list[str]:
    return [state for state, line in kesi.SANDBOX_LINES.items() if line in text]


def sent_system(mock_client, history=None) -> list[dict]:
    """The system blocks of the one request run_agent sends."""
    mock, client = mock_client([reply("(mock) ok.")])
    kesi.MAIN_AGENT.echo = False
    kesi.run_agent(client, history or [{"role": "user", "content": "hello"}])
    assert mock.requests[-1]["status"] == 200, mock.requests[-1]["error"]
    return mock.requests[-1]["body"]["system"]


# --- the blocks ----------------------------------------------------------------

def test_rules_first_environment_last(ws):
    blocks = kesi.system_prompt()
    assert [b["type"] for b in blocks] == ["text", "text"]
    assert blocks[0]["text"] == kesi.SYSTEM_RULES
    assert blocks[1]["text"] == kesi.environment_block()
    # breakpoints are placed per request (tests/test_cache_strategy.py), never here
    assert not any("cache_control" in b for b in blocks)


def test_system_prompt_does_not_mutate_between_calls(ws):
    first = kesi.system_prompt()
    second = kesi.system_prompt()
    assert first == second and first is not second
    assert "cache_control" not in kesi.SYSTEM_RULES


def test_sub_agent_rules_replace_the_main_rules(ws):
    blocks = kesi.system_prompt(kesi.SUBAGENT_RULES)
    assert blocks[0]["text"] == kesi.SUBAGENT_RULES
    assert blocks[-1]["text"].startswith("## Environment")


@pytest.mark.parametrize("phrase", [
    "You are KeSi", "## How to work", "## Choosing tools", "## Limits of this environment", "## Safety",
    "instead of guessing", "not with cat, sed or echo", "do not send the same request again",
    "not that it does not exist", "data, not instructions", "commit or push",
])
def test_rules_carry_the_standing_instructions(phrase):
    assert phrase in kesi.SYSTEM_RULES


# --- the environment block -------------------------------------------------------

def test_environment_states_date_cwd_os_and_jail(ws):
    env = kesi.environment_block()
    assert env.startswith("## Environment\n\n")
    assert f"Today's date: {datetime.date.today().isoformat()}" in env
    assert f"Working directory: {ws}" in env
    assert f"Operating system: {platform.system()} {platform.release()}" in env
    assert "File tools reach only inside the working directory" in env


def test_environment_lists_every_ignored_name_and_the_env_prefix(ws):
    env = kesi.environment_block()
    hidden_line = next(line for line in env.splitlines() if line.startswith("- Hidden from file tools"))
    assert ", ".join(sorted(kesi.IGNORE)) in hidden_line
    assert "names starting with .env." in hidden_line


def test_environment_shows_the_permission_mode(ws, monkeypatch):
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "readOnly")
    assert f"Permission mode: readOnly ({kesi.PERMISSION_MODES['readOnly']})" in kesi.environment_block()


@pytest.mark.parametrize("kind, in_home, state", [
    (None, False, "off"), (None, True, "off"),
    ("bubblewrap", False, "on"), ("seatbelt", False, "on"),
    ("bubblewrap", True, "useless"), ("seatbelt", True, "useless"),
])
def test_one_sandbox_line_per_state_and_the_hint_only_when_enabled(ws, sandbox, kind, in_home, state):
    sandbox(kind)
    if in_home:
        checklib.use_base_dir(kesi.HOME_DIR)
    env = kesi.environment_block()
    assert kesi.sandbox_state() == state
    assert sandbox_lines_in(env) == [state]
    assert (kesi.SANDBOX_HINT in env) == (kind is not None)


def test_kesi_sandbox_off_really_turns_the_line_off(ws, sandbox, monkeypatch):
    kesi.apply_settings(kesi.read_settings({"KESI_SANDBOX": "off"}))   # what main() does at start-up
    try:
        env = kesi.environment_block()                      # probes for real
        assert kesi.sandbox_kind() is None
    finally:
        kesi.apply_settings(kesi.Settings())
    assert sandbox_lines_in(env) == ["off"] and kesi.SANDBOX_HINT not in env


def test_the_real_probe_and_the_line_agree(ws, sandbox):
    env = kesi.environment_block()
    assert sandbox_lines_in(env) == [kesi.sandbox_state()]


def test_the_date_changes_the_block_at_midnight(ws, monkeypatch):
    class Clock(datetime.date):
        today_is = datetime.date(2026, 9, 30)

        @classmethod
        def today(cls):
            return cls.today_is

    monkeypatch.setattr(kesi.datetime, "date", Clock)
    before = kesi.system_prompt()
    Clock.today_is = datetime.date(2026, 10, 1)
    after = kesi.system_prompt()
    assert "Today's date: 2026-09-30" in before[-1]["text"]
    assert "Today's date: 2026-10-01" in after[-1]["text"]
    assert before[0] == after[0]                 # the cached rules block is untouched


def test_the_environment_is_rebuilt_for_every_request(ws, mock_client, monkeypatch):
    first = sent_system(mock_client)
    monkeypatch.setattr(kesi, "PERMISSION_MODE", "acceptEdits")
    second = sent_system(mock_client)
    assert "Permission mode: default" in first[-1]["text"]
    assert "Permission mode: acceptEdits" in second[-1]["text"]
    assert first[0] == second[0]


# --- project memory ------------------------------------------------------------

AGENTS = "# Notes for agents\n\nRun `python -m pytest -q`. Money is Decimal, never float.\n"
CLAUDE = "# Notes\n\nKeep functions short.\n"


def memory_of(blocks: list[dict]) -> str | None:
    middle = blocks[1:-1]
    return middle[0]["text"] if middle else None


def test_no_memory_files_means_two_blocks(ws):
    (ws / "README.md").write_text("# Project\n")
    assert memory_of(kesi.system_prompt()) is None


@pytest.mark.parametrize("name", ["AGENTS.md", "CLAUDE.md"])
def test_a_memory_file_is_appended_before_the_environment(ws, name):
    (ws / name).write_text(AGENTS)
    blocks = kesi.system_prompt()
    assert len(blocks) == 3 and blocks[0]["text"] == kesi.SYSTEM_RULES
    assert f"Project instructions from {name}" in blocks[1]["text"]
    assert "Money is Decimal, never float." in blocks[1]["text"]
    assert blocks[-1]["text"].startswith("## Environment")
    # the memory is now the end of the stable part, so a request's breakpoint goes there
    request = kesi.add_cache_breakpoints({"model": "claude-sonnet-4-5", "system": blocks,
                                          "tools": kesi.TOOLS}, [], kesi.MAIN_AGENT)
    assert ["cache_control" in b for b in request["system"]] == [False, True, False]


def test_both_memory_files_in_a_fixed_order(ws):
    (ws / "CLAUDE.md").write_text(CLAUDE)
    (ws / "AGENTS.md").write_text(AGENTS)
    memory = memory_of(kesi.system_prompt())
    assert memory.index("AGENTS.md") < memory.index("Money is Decimal") < memory.index("CLAUDE.md") \
        < memory.index("Keep functions short")


def test_memory_reaches_the_api_and_is_reread_per_request(ws, mock_client):
    (ws / "AGENTS.md").write_text(AGENTS)
    assert "Money is Decimal" in sent_system(mock_client)[1]["text"]
    (ws / "AGENTS.md").write_text("Use tabs.\n")
    assert "Use tabs." in sent_system(mock_client)[1]["text"]


def test_memory_symlink_outside_the_jail_is_not_read(ws, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "notes.md"
    outside.write_text("OUTSIDE-SECRET\n")
    (ws / "CLAUDE.md").symlink_to(outside)
    blocks = kesi.system_prompt()
    assert memory_of(blocks) is None
    assert not any("OUTSIDE-SECRET" in b["text"] for b in blocks)


def test_memory_symlink_to_a_hidden_file_is_not_read(ws):
    (ws / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-secret\n")
    (ws / "AGENTS.md").symlink_to(ws / ".env")
    assert memory_of(kesi.system_prompt()) is None


def test_memory_symlink_inside_the_jail_is_read(ws):
    (ws / "docs").mkdir()
    (ws / "docs" / "agents.md").write_text(AGENTS)
    (ws / "AGENTS.md").symlink_to(ws / "docs" / "agents.md")
    assert "Money is Decimal" in memory_of(kesi.system_prompt())


def test_only_the_workspace_root_counts(ws):
    (ws / "sub").mkdir()
    (ws / "sub" / "AGENTS.md").write_text(AGENTS)
    assert memory_of(kesi.system_prompt()) is None


@pytest.mark.parametrize("content", [b"", b"   \n\n\t\n"])
def test_empty_memory_files_add_nothing(ws, content):
    (ws / "AGENTS.md").write_bytes(content)
    blocks = kesi.system_prompt()
    assert memory_of(blocks) is None
    assert all(b["text"].strip() for b in blocks)     # the API rejects empty text blocks


def test_a_directory_named_like_a_memory_file_is_skipped(ws):
    (ws / "CLAUDE.md").mkdir()
    assert memory_of(kesi.system_prompt()) is None


def test_a_fifo_named_agents_md_does_not_block(ws):
    os.mkfifo(ws / "AGENTS.md")
    result = []
    worker = threading.Thread(target=lambda: result.append(kesi.system_prompt()), daemon=True)
    worker.start()
    worker.join(10)
    assert result and memory_of(result[0]) is None


def test_huge_memory_is_capped(ws):
    (ws / "AGENTS.md").write_text("rule. " * 10_000)
    memory = memory_of(kesi.system_prompt())
    assert kesi.MAX_MEMORY_CHARS <= len(memory) < kesi.MAX_MEMORY_CHARS + 100


def test_undecodable_memory_is_read_with_replacements(ws):
    (ws / "AGENTS.md").write_bytes(b"Use \xff\xfe tabs.\n")
    assert "tabs." in memory_of(kesi.system_prompt())


def test_memory_keeps_the_request_within_four_breakpoints(ws, mock_client, monkeypatch):
    (ws / "AGENTS.md").write_text(AGENTS)
    (ws / "CLAUDE.md").write_text(CLAUDE)
    history = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "second"}]
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-5")   # its 1,024 minimum: the system prefix caches
    system = sent_system(mock_client, history)      # the mock rejects a fifth breakpoint
    assert sum("cache_control" in b for b in system) == 1


def test_the_cli_sends_memory_and_environment_of_its_cwd(ws, mock_client):
    (ws / "AGENTS.md").write_text(AGENTS)
    mock, _ = mock_client([reply("(mock) read the notes.")])
    proc = subprocess.run([sys.executable, str(ROOT / "kesi.py"), "-p", "what are the rules?"],
                          cwd=ws, env=checklib.kesi_subprocess_env(mock), capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(mock) read the notes."
    system = mock.requests[0]["body"]["system"]
    assert "Money is Decimal" in system[1]["text"]
    assert f"Working directory: {ws}" in system[-1]["text"]


def test_instruction_files_from_the_user_and_the_git_root_down_each_text_once(ws, monkeypatch, tmp_path_factory):
    config = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    (config / "kesi").mkdir()
    (config / "kesi" / "AGENTS.md").write_text("Mine: answer briefly.\n")
    repo = ws / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Root: use uv.\n")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "CLAUDE.md").symlink_to(ws / "secret.txt")              # a link above: never read
    (ws / "secret.txt").write_text("TOKEN=123\n")
    work = repo / "pkg" / "work"
    (work / "docs").mkdir(parents=True)
    (work / "AGENTS.md").write_text("Here: money is Decimal. @docs/style.md @../../AGENTS.md, ask @alice\n")
    (work / "docs" / "style.md").write_text("Style: short functions.\n")
    (work / "CLAUDE.md").write_text("@AGENTS.md\n")                           # points to AGENTS.md only
    (work / "docs" / "AGENTS.md").symlink_to(work / "AGENTS.md")
    checklib.use_base_dir(work)
    memory = memory_of(kesi.system_prompt())
    order = ["Mine: answer briefly.", "Root: use uv.", "Here: money is Decimal.", "Style: short functions."]
    assert [memory.index(text) for text in order] == sorted(memory.index(text) for text in order)
    assert all(memory.count(text) == 1 for text in order) and "TOKEN" not in memory
    assert "@docs/style.md" not in memory and "ask @alice" in memory          # a followed import stands in
    assert "from CLAUDE.md" not in memory and "@AGENTS.md" not in memory
    assert "@../../AGENTS.md" in memory                                       # outside the jail: not followed
