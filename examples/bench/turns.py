# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (f): KeSi's own work per request at 320 and 1,280 requests of a tool loop.

No network and no model: one "request" here is everything KeSi itself does
around one request of a tool loop, on a journal of N messages (two per
request):
  append a tool round (assistant tool_use + user tool_result), manage_context
  (the token estimate, and clearing old results once past half the context),
  request_for (system prompt, memory file check, breakpoints), the body as
  sent (request_body: the JSON of new messages, joined to the JSON kept for
  the others), recording the response's usage on the meter, the cost line,
  and saving the session.
Two states of the context: below half the window, and past half (the journal
at 60 %, so every request runs the clearing of old tool results).
Each column is a median over many requests, in ms; "x 320" is the time over
the same state's 320-request row. Beside it, in the same run:
  SDK body    what the anthropic SDK would do with the request before sending
              it (its copy of the params, then json), as KeSi had it encoded
              before open_stream: it grows with the journal;
  naive       a whole-journal token estimate and the session file rewritten.
Goal: KeSi's own work at 1,280 requests within 1.2x of 320.

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
    kesi.request_body(request)
    lap("body")
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


def sdk_body_time(request: dict) -> float | None:
    """The SDK's preparation and encoding of a request body (private modules: None if they moved)."""
    try:
        from anthropic._utils._json import openapi_dumps
        from anthropic._utils._prepare import prepare_request_data
    except ImportError:
        return None
    started = time.perf_counter()
    openapi_dumps(prepare_request_data(request, location="body"))
    return time.perf_counter() - started


def measure(messages: int, turns: int, past_half: bool) -> dict:
    history = journal(messages)
    kesi.SESSION_FILE = None
    kesi.MAIN_AGENT.size_mark = kesi.MAIN_AGENT.clear_mark = None
    kesi.save_session(history)                      # the file exists, as in a long session
    kesi.METER.calls.clear()
    for _ in range(messages // 2):                  # one recorded request per tool round so far
        kesi.METER.record({"input_tokens": 1, "output_tokens": 1})
    whole = kesi.estimate_tokens(history, kesi.MAIN_AGENT)
    kesi.CONTEXT_WINDOW = int(whole / 0.6) if past_half else 10**9
    kesi.manage_context(None, history, kesi.MAIN_AGENT)    # a first clearing, once, as in a real session
    rewritten = kesi.SESSION_FILE.with_name("naive.jsonl")
    samples, naive, sdk = [], [], []
    for i in range(turns):              # interleaved, so machine load hits all alike
        samples.append(one_turn(history, 10**6 + i))
        naive.append(naive_turn(history, rewritten))
        sdk.append(sdk_body_time(kesi.request_for(history, kesi.MAIN_AGENT)))
    med = {k: statistics.median(s[k] for s in samples) for k in samples[0]}
    return {"steps": med, "total": statistics.median(sum(s.values()) for s in samples),
            "naive": statistics.median(naive), "sdk": None if None in sdk else statistics.median(sdk)}


def main():
    args = parse_args(__doc__.splitlines()[0])
    turns = 9 if args.small else 31
    rows = []
    with checklib.workspace({"AGENTS.md": "# Notes\n\nRun pytest -q.\n"}):
        quiet_kesi()
        for past_half in (False, True):
            first = None
            for requests in (320, 1280):
                r = measure(2 * requests, turns, past_half)
                first = first or r
                m, sdk = r["steps"], r["sdk"]
                rows.append(["past half" if past_half else "below half", requests, ms(m["estimate"]),
                             ms(m["request"]), ms(m["body"]), ms(m["meter"]), ms(m["session"]), ms(r["total"]),
                             f"{r['total'] / first['total']:.2f}x", "n/a" if sdk is None else ms(sdk),
                             "n/a" if sdk is None else f"{sdk / first['sdk']:.2f}x", ms(r["naive"])])
    print(f"# KeSi's own work per request (median of {turns}, ms)")
    print(table(["context", "requests", "estimate", "request", "body", "meter", "session save", "KeSi per request",
                 "x 320", "SDK body", "x 320", "naive"], rows))


if __name__ == "__main__":
    main()
