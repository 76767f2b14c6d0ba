# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 19 checks: context management (clear old tool results, then compact).

The real agent loop reads real files against the mock API with a shrunken
kesi.CONTEXT_WINDOW: first old large tool results become a stub, then the
history is summarised, automatically mid-task and by /compact. The mock
validates every request, so each journal after compaction must be one the
API accepts. Run: uv run examples/day19/check.py
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, capture_ui, mock_client, workspace   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                             # noqa: E402
from mock_api import reply, tool_call                   # noqa: E402

checks = Checks("Day 19: context management")

# Big enough that the prefix the summary request shares with the turn before
# it passes Haiku 4.5's minimum cacheable prompt (4,096 tokens), as on the API.
BIG_FILES = {f"logs/big{i}.txt": "".join(f"log line {i}.{n}: " + "x" * 40 + "\n" for n in range(120))
             for i in range(1, 7)}
FILES = {"small.txt": "tiny\n", **BIG_FILES}
SUMMARY = "SUMMARY: the user wants the logs checked; big1-big3 were read, nothing odd so far."


def read_call(path: str):
    return reply(tool_call("read_file", {"file_path": path}))


def is_compaction(body: dict) -> bool:
    """A summary request: a normal request whose last user message asks for the summary."""
    last = body["messages"][-1]
    return last["role"] == "user" and kesi.COMPACT_PROMPT[:60] in kesi.text_of(last["content"])


def with_summaries(steps: list):
    """A mock script: compaction requests get SUMMARY, the rest follow steps."""
    queue = list(steps)
    return lambda body, n: reply(SUMMARY) if is_compaction(body) else (queue.pop(0) if queue else reply("done"))


def round_tokens() -> int:
    """kesi's estimate for one read of a big file (tool call plus result)."""
    output, _ = kesi.read_file("logs/big1.txt")
    kesi.READ_VERSIONS.clear()
    one_round = [{"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_mock_1", "name": "read_file",
                                                   "input": {"file_path": "logs/big1.txt"}}]},
                 {"role": "user", "content": [kesi.tool_result("toolu_mock_1", output, False)]}]
    return kesi.json_chars(one_round) // 4


def window_for(threshold: float, results: float) -> int:
    """A context window whose threshold is crossed once `results` big reads are in."""
    base = kesi.estimate_tokens([{"role": "user", "content": "Check the logs."}], kesi.MAIN_AGENT)
    return int((base + results * round_tokens()) / threshold)


def result_contents(body: dict) -> list:
    return [b["content"] for m in body["messages"] if isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def all_accepted(mock) -> bool:
    return all(r["status"] == 200 for r in mock.requests)


def check_clearing():
    steps = [read_call("small.txt")] + [read_call(p) for p in BIG_FILES] + [reply("The logs look fine.")]
    with workspace(FILES), mock_client(with_summaries(steps)) as (mock, client):
        kesi.CONTEXT_WINDOW = window_for(kesi.CLEAR_RESULTS_AT, 2.5)
        screen = capture_ui()
        history = []
        answer = kesi.run_turn(client, history, "Check the logs.")
        final = result_contents(mock.requests[-1]["body"])
        keep = kesi.KEEP_RECENT_RESULTS
        checks.check("the run finishes and every request is accepted", answer.ok and all_accepted(mock), answer)
        checks.check("no compaction was needed: clearing was enough",
                     not any(is_compaction(r["body"]) for r in mock.requests))
        checks.check("old large results became the stub", final[1:-keep] == [kesi.CLEARED_RESULT] * 2, final[1:-keep])
        checks.check(f"the newest {keep} results stay whole",
                     all(kesi.CLEARED_RESULT != c and "log line" in c for c in final[-keep:]))
        checks.check("small results are not worth clearing and stay", "tiny" in final[0], final[0])
        checks.check("the tool calls themselves stay in the history",
                     sum(b.get("type") == "tool_use" for m in history if isinstance(m["content"], list)
                         for b in m["content"]) == 7)
        checks.check("the journal itself is trimmed (so the saved session is too)",
                     sum(kesi.CLEARED_RESULT in json.dumps(m) for m in history) == 2)
        checks.check("the terminal says what was cleared", "(context: cleared 1 old tool result)" in screen.getvalue(),
                     screen.getvalue()[-600:])


def check_auto_compaction():
    steps = [read_call(f"logs/big{i}.txt") for i in (1, 2, 3)] + [reply("Finished after compaction.")]
    with workspace(FILES), mock_client(with_summaries(steps)) as (mock, client):
        kesi.CONTEXT_WINDOW = window_for(kesi.COMPACT_AT, 2.5)
        screen = capture_ui()
        history = []
        answer = kesi.run_turn(client, history, "Check the logs.")
        bodies = [r["body"] for r in mock.requests]
        summary_at = next((i for i, b in enumerate(bodies) if is_compaction(b)), None)
        checks.check("the threshold is crossed mid-task and a summary is requested", summary_at == 3,
                     [is_compaction(b) for b in bodies])
        if summary_at != 3:
            return
        ask, before, after = bodies[3], bodies[2], bodies[4]
        checks.check("the summary request reuses the system prompt, tools and tool_choice",
                     ask["system"] == before["system"] and ask["tools"] == before["tools"]
                     and ask.get("tool_choice") == before.get("tool_choice"))
        last = ask["messages"][-1]["content"]
        checks.check("the pending tool round is answered, then the summary instruction follows",
                     [b["type"] for b in last] == ["tool_result", "text"] and kesi.COMPACT_PROMPT in last[-1]["text"])
        checks.check("the summary request reads its prefix from the prompt cache",
                     mock.requests[3]["usage"]["cache_read_input_tokens"] > 0, mock.requests[3]["usage"])
        text = kesi.text_of(after["messages"][0]["content"])
        checks.check("after compaction the task goes on from one summary message",
                     len(after["messages"]) == 1 and text.startswith(kesi.COMPACT_INTRO) and SUMMARY in text
                     and "Continue the task." in text, after["messages"])
        checks.check("the compacted journal is accepted and the task finishes",
                     all_accepted(mock) and answer.ok and answer.text == "Finished after compaction.", answer)
        checks.check("the summary's cost is on the meter as compact",
                     [c["label"] for c in kesi.METER.calls].count("compact") == 1)
        checks.check("the terminal says the conversation was compacted",
                     "compacting the conversation" in screen.getvalue())
        saved = kesi.read_session(kesi.SESSION_FILE)[0]
        checks.check("the saved session holds the compacted journal (summary, answer)",
                     saved == history and len(saved) == 2 and kesi.text_of(saved[0]["content"]).startswith(kesi.COMPACT_INTRO),
                     saved)


def check_manual_compact():
    steps = [reply("First answer."), reply("Second answer."), reply("Third answer.")]
    with workspace(), mock_client(with_summaries(steps)) as (mock, client):
        screen = capture_ui()
        history = []
        kesi.run_turn(client, history, "First question.")
        kesi.run_turn(client, history, "Second question.")
        kesi.handle_slash("/compact the second question", client, history)
        ask = mock.requests[2]["body"]
        checks.check("/compact sends one summary request, the instruction as the last user message",
                     is_compaction(ask) and ask.get("tool_choice") == mock.requests[1]["body"].get("tool_choice"))
        checks.check("it reuses the system prompt and tools of the conversation",
                     ask["system"] == mock.requests[1]["body"]["system"]
                     and ask["tools"] == mock.requests[1]["body"]["tools"])
        instruction = kesi.text_of(ask["messages"][-1]["content"])
        checks.check("the focus given to /compact is passed on",
                     kesi.COMPACT_PROMPT in instruction and "Pay special attention to: the second question" in instruction)
        checks.check("the history is replaced by the summary and an acknowledgement",
                     len(history) == 2 and SUMMARY in history[0]["content"] and history[1]["role"] == "assistant")
        checks.check("the terminal reports the compaction", "(compacted 4 messages into 2)" in screen.getvalue())
        lines = [json.loads(line) for line in kesi.read_records(kesi.SESSION_FILE)[0]]
        lines = [line for line in lines if kesi.CLOCK not in line]      # each save's cache clock line
        checks.check("the session file keeps the transcript, then a marker and the compacted journal",
                     len(lines) == 1 + 4 + 1 + 2 and kesi.RESTART in lines[5]
                     and kesi.read_session(kesi.SESSION_FILE)[0] == history, len(lines))
        answer = kesi.run_turn(client, history, "Third question.")
        after = mock.requests[3]["body"]["messages"]
        checks.check("the next request starts from the summary and is accepted",
                     answer.ok and all_accepted(mock) and len(after) == 3
                     and kesi.text_of(after[0]["content"]).startswith(kesi.COMPACT_INTRO), after)


original_window = kesi.CONTEXT_WINDOW
try:
    check_clearing()
    check_auto_compaction()
    check_manual_compact()
finally:
    kesi.CONTEXT_WINDOW = original_window
sys.exit(checks.finish())
