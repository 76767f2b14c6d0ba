# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (f): KeSi's own work per turn at 100 / 1,000 / 5,000 messages.

No network and no model: one "turn" here is everything KeSi itself does
around one request of a tool loop, on a journal of N messages:
  append a tool round (assistant tool_use + user tool_result), manage_context
  (the token estimate), request_for (system prompt, memory file check,
  breakpoints), recording the response's usage on the meter, the cost line
  (this turn and the session), and saving the session.
Each column is a median over many turns, in ms. Beside it, in the same run,
a naive harness's turn on the same journal: a whole-journal token estimate
(the json.dumps KeSi did before) and the session file rewritten whole; the
ratio column is KeSi's turn over that one. The goal: 2 ms or less at 5,000.

Run: uv run examples/bench/turns.py [--small]
"""
import json
import statistics
import time

from benchlib import kesi, ms, parse_args, quiet_kesi, table
import checklib


def tool_round(n: int) -> list[dict]:
    body = "\n".join(f"{i:>6}\tdef function_{n}_{i}(x): return x + {i}" for i in range(1, 9))
    return [{"role": "assistant", "content": [
                {"type": "text", "text": f"Reading file {n}."},
                {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file", "input": {"file_path": f"m{n}.py"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": body, "is_error": False}]}]


def journal(messages: int) -> list[dict]:
    history = [{"role": "user", "content": "Look through the project and fix the bug."}]
    n = 0
    while len(history) < messages:
        n += 1
        history += tool_round(n)
    return history


def one_turn(history: list[dict], n: int) -> dict:
    """KeSi's work for one tool round; returns seconds per step."""
    steps, t = {}, time.perf_counter()

    def lap(name):
        nonlocal t
        now = time.perf_counter()
        steps[name] = now - t
        t = now

    before = len(kesi.METER.calls)
    history += tool_round(n)
    kesi.manage_context(None, history, kesi.MAIN_AGENT)
    lap("estimate")
    request = kesi.request_for(history, kesi.MAIN_AGENT)
    lap("request")
    sent = kesi.estimate_tokens(history, kesi.MAIN_AGENT)
    usage = {"input_tokens": 50, "output_tokens": 80, "cache_creation_input_tokens": 300,
             "cache_read_input_tokens": sent - 350}
    kesi.METER.record(usage)
    kesi.note_request_size(kesi.MAIN_AGENT, usage)
    kesi.METER.report(before)
    lap("meter")
    kesi.save_session(history)
    lap("session")
    assert request["messages"][-1]["content"][-1].get("cache_control")
    return steps


def naive_turn(history: list[dict], path) -> float:
    """O(history) work per turn: estimate from the whole journal, rewrite the session file."""
    started = time.perf_counter()
    len(json.dumps(history, default=str))
    path.write_text("".join(kesi.as_line(m) + "\n" for m in history), encoding="utf-8")
    return time.perf_counter() - started


def measure(messages: int, turns: int) -> list:
    history = journal(messages)
    kesi.SESSION_FILE = None
    kesi.save_session(history)                      # the file exists, as in a long session
    kesi.METER.calls.clear()
    for _ in range(messages // 2):                  # one recorded request per tool round so far
        kesi.METER.record({"input_tokens": 1, "output_tokens": 1})
    rewritten = kesi.SESSION_FILE.with_name("naive.jsonl")
    samples, naive = [], []
    for i in range(turns):              # interleaved, so machine load hits both alike
        samples.append(one_turn(history, 10**6 + i))
        naive.append(naive_turn(history, rewritten))
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    total = statistics.median(sum(s.values()) for s in samples)
    base = statistics.median(naive)
    size = kesi.SESSION_FILE.stat().st_size
    return [messages, ms(med["estimate"]), ms(med["request"]), ms(med["meter"]), ms(med["session"]),
            ms(total), ms(base), f"{total / base:.2f}x", "yes" if ms(total) <= 2 else "NO", f"{size / 1e3:,.0f} kB"]


def main():
    args = parse_args(__doc__.splitlines()[0])
    turns = 9 if args.small else 31
    rows = []
    with checklib.workspace({"AGENTS.md": "# Notes\n\nRun pytest -q.\n"}):
        quiet_kesi()
        kesi.CONTEXT_WINDOW = 10**9            # clearing and compaction stay out
        for messages in (100, 1000, 5000):
            rows.append(measure(messages, turns))
    print(f"# KeSi's own work per turn (median of {turns} turns, ms)")
    print(table(["messages", "estimate", "request", "meter", "session save", "KeSi per turn",
                 "naive per turn", "KeSi / naive", "<= 2 ms", "session file"], rows))


if __name__ == "__main__":
    main()
