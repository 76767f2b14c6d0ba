"""Headless mode (-p) as scripts and CI use it: real kesi.py child processes
against the mock API (flag checks: main() in this process). stdout carries only
the answer; errors and progress go to stderr; piped input is joined to the prompt."""
import json
import subprocess
import sys

import kesi
from checklib import ROOT, kesi_subprocess_env, records_of
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


# --- flags for scripts and CI ------------------------------------------------------------

def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_output_format_json_reports_answer_turns_tokens_cost_and_session(tmp_path):
    script = [reply("Looking.", tool_call("list_files", {})), "Two files."]
    with MockAPI(script) as mock:
        proc = run(tmp_path, "-p", "what is here?", "--output-format", "json", mock=mock)
    assert proc.returncode == 0, proc.stderr
    [result] = json_lines(proc.stdout)           # stdout is exactly one JSON object
    assert result["type"] == "result" and result["is_error"] is False and result["result"] == "Two files."
    assert result["subtype"] == "success"                                # Claude Code's result subtype
    assert result["num_turns"] == 2
    assert result["usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in mock.requests)
    assert result["usage"]["output_tokens"] == sum(r["usage"]["output_tokens"] for r in mock.requests)
    assert result["total_cost_usd"] > 0
    [saved] = (records_of(tmp_path) / "sessions").glob("*.jsonl")
    assert result["session_id"] == saved.stem


def test_output_format_json_on_failure_is_still_one_json_object(tmp_path):
    with MockAPI([error(400, "prompt is too long: 250000 tokens > 200000 maximum")]) as mock:
        proc = run(tmp_path, "-p", "hi", "--output-format", "json", mock=mock)
    assert proc.returncode == 1
    [result] = json_lines(proc.stdout)
    assert result["is_error"] is True and "prompt is too long" in result["result"] and result["num_turns"] == 0
    assert result["subtype"] == "error_during_execution"


# --output-format stream-json: its events are asserted with the session id they share in
# test_claude_code_names.py::test_resume_by_id_and_the_session_id_on_every_stream_json_line (one run).


def test_max_turns_flag_wins_over_the_setting(tmp_path):
    with MockAPI(MockAPI.mode("loop")) as mock:
        proc = run(tmp_path, "-p", "loop", "--max-turns", "1", mock=mock, KESI_MAX_TURNS="5")
    assert proc.returncode == 1 and proc.stdout == ""
    assert "stopped after 1 model round trips" in proc.stderr and "--max-turns" in proc.stderr
    assert len(mock.requests) == 1


def test_max_budget_stops_before_a_request_that_could_pass_it(tmp_path):
    # Only output is priced, at $1000 per million tokens: with max_tokens 100 a
    # request can cost up to $0.10, so a $0.15 budget allows the next request
    # only while less than $0.05 is spent.
    prices = json.dumps({"input": 0, "output": 1000, "cache_write": 0, "cache_read": 0})
    with MockAPI(MockAPI.mode("loop")) as mock:
        proc = run(tmp_path, "-p", "loop", "--max-budget-usd", "0.15", "--output-format", "json",
                   mock=mock, KESI_PRICES=prices, KESI_MAX_TOKENS="100")
    assert proc.returncode == 1
    [result] = json_lines(proc.stdout)
    assert result["is_error"] and "--max-budget-usd" in result["result"]
    assert result["subtype"] == "error_max_budget_usd"
    spent = [r["usage"]["output_tokens"] * 1000 / 1e6 for r in mock.requests]
    assert all(sum(spent[:n]) + 0.10 <= 0.15 for n in range(len(spent)))     # each request was allowed
    assert sum(spent) + 0.10 > 0.15                                          # the next one was not
    assert result["total_cost_usd"] <= 0.15 and 1 <= len(mock.requests) < 20


def test_bad_flag_values_are_usage_errors(main_in_process):
    cases = [(["--max-turns", "0"], "at least 1"), (["--max-budget-usd", "-1"], "above 0"),
             (["--allowed-tools", "run_command"], "name the commands"),
             (["--disallowed-tools", "Frobnicate"], "not understood"),
             (["--max-budget-usd", "1", "--model", "other-vendor-model"], "KESI_PRICES"),
             (["--output-format", "json"], "headless")]
    for args, says in cases:                           # main() in this process: a flag's check is the subject
        with MockAPI() as mock:
            code, stdout, stderr = main_in_process([*(["-p", "hi"] if args[0] != "--output-format" else []), *args],
                                                   mock=mock, KESI_SANDBOX="off")
        assert code == 2 and says in stderr, (args, stderr)
        assert "Traceback" not in stderr and mock.requests == []
        assert "workspace:" not in stdout + stderr, stdout     # refused before the banner


def test_append_system_prompt_and_tool_flags_reach_the_request_and_the_decision(tmp_path):
    script = [reply(tool_call("run_command", {"command": "touch made.txt"}),
                    tool_call("run_command", {"command": "touch other.txt"}),
                    tool_call("write_file", {"file_path": "notes.md", "content": "hi\n"})),
              "done"]
    with MockAPI(script) as mock:
        proc = run(tmp_path, "-p", "go", "--append-system-prompt", "Always answer in Taiwanese.",
                   "--allowed-tools", "Bash(touch made.txt), edit_file", "--disallowed-tools", "task,grep",
                   mock=mock)
    assert proc.returncode == 0, proc.stderr
    body = mock.requests[0]["body"]
    assert body["system"][0]["text"].endswith("\n\nAlways answer in Taiwanese.")
    tools = [t["name"] for t in body["tools"]]
    assert "task" not in tools and "grep" not in tools and "run_command" in tools
    results = mock.requests[1]["body"]["messages"][-1]["content"]
    assert [r["is_error"] for r in results] == [False, True, False]     # nobody to ask about other.txt
    assert (tmp_path / "made.txt").exists() and not (tmp_path / "other.txt").exists()
    assert (tmp_path / "notes.md").read_text() == "hi\n"


def test_a_disallowed_rule_beats_bypass_mode(tmp_path):
    script = [reply(tool_call("run_command", {"command": "touch made.txt"})), "refused, as it should be"]
    with MockAPI(script) as mock:
        proc = run(tmp_path, "-p", "go", "--permission-mode", "bypassPermissions",
                   "--disallowed-tools", "Bash(touch:*)", mock=mock)
    assert proc.returncode == 0, proc.stderr
    result = mock.requests[1]["body"]["messages"][-1]["content"][0]
    assert result["is_error"] and "--disallowed-tools" in result["content"]
    assert not (tmp_path / "made.txt").exists()


def test_version(tmp_path):
    proc = run(tmp_path, "--version")
    assert proc.returncode == 0 and proc.stdout == f"kesi.py {kesi.VERSION}\n"
