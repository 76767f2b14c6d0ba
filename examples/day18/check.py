# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 18 checks: the cost meter, a broken connection, and prompt caching.

Usage numbers come from the local mock API, which simulates the API's prefix
cache (cache_creation_input_tokens / cache_read_input_tokens), through the
real SDK and real SSE. The disconnect is a real TCP reset mid-stream.
No key, no network.

Run: uv run examples/day18/check.py

PROJECT and session_script() are also used by tests/test_cost_cache.py.
"""
import io
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, records_of, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import anthropic                                        # noqa: E402
import kesi                                             # noqa: E402
from mock_api import reply, tool_call, error, stream_events   # noqa: E402

# The published list prices, USD per million tokens (input, output); cache
# writes (5 minutes) cost 1.25x input, cache reads 0.1x input.
LIST_PRICES = {
    "claude-haiku-4-5": (1, 5), "claude-haiku-4-5-20251001": (1, 5),
    "claude-sonnet-4-5": (3, 15), "claude-sonnet-4-20250514": (3, 15),
    "claude-opus-4-5": (5, 25), "claude-opus-4-6": (5, 25), "claude-opus-5": (5, 25),
    "claude-opus-4-1-20250805": (15, 75), "claude-opus-4-20250514": (15, 75),
}


def expected_cost(usages: list[dict], input_price=1.0, output_price=5.0) -> float:
    """The bill for API usage dicts, computed from the published rules (Haiku 4.5 by default)."""
    return sum(u["input_tokens"] * input_price + u["output_tokens"] * output_price
               + u.get("cache_creation_input_tokens", 0) * input_price * 1.25
               + u.get("cache_read_input_tokens", 0) * input_price * 0.1 for u in usages) / 1e6


class Screen(io.StringIO):
    """Stands in for kesi.UI: keeps what KeSi printed and still shows it."""

    def write(self, text: str) -> int:
        sys.stdout.write(text)
        return super().write(text)


TURN_LINE = re.compile(r"\(this turn: (\d+) requests?, input ([\d,]+), output ([\d,]+)"
                       r"(?:, cache read ([\d,]+), cache write ([\d,]+))?, \$([\d.]+)(.*); session \$([\d.]+)\)")


def cost_lines(text: str) -> list[dict]:
    lines = []
    for m in TURN_LINE.finditer(text):
        n, inp, out, read, write, cost, notes, session = m.groups()
        number = lambda s: int((s or "0").replace(",", ""))   # noqa: E731
        lines.append({"requests": int(n), "input": number(inp), "output": number(out),
                      "cache_read": number(read), "cache_write": number(write),
                      "cost": float(cost), "notes": notes, "session": float(session)})
    return lines


def summed(usages: list[dict]) -> dict:
    keys = {"input": "input_tokens", "output": "output_tokens",
            "cache_read": "cache_read_input_tokens", "cache_write": "cache_creation_input_tokens"}
    return {ours: sum(u.get(theirs, 0) for u in usages) for ours, theirs in keys.items()}


def events_through_first_block(text: str) -> int:
    """How many SSE events the mock sends up to the end of a first text block."""
    message = {"content": [{"type": "text", "text": text}], "usage": {"output_tokens": 1},
               "stop_reason": "end_turn"}
    names = [name for name, _ in stream_events(message)]
    return names.index("content_block_stop") + 1


# --- a realistic project and a scripted 20-turn session ------------------------

def module(name: str, rules: int) -> str:
    lines = [f'"""{name}: one part of the order pricing service."""', "", "from decimal import Decimal", ""]
    for i in range(rules):
        lines += [f"def {name}_rule_{i}(order, rate=Decimal('0.{i + 1:02d}')):",
                  f'    """Rule {i} of {name}: a discount once the subtotal passes {100 + 10 * i}."""',
                  "    subtotal = sum(line.price * line.quantity for line in order.lines)",
                  f"    if subtotal > {100 + 10 * i}:",
                  "        return subtotal * (1 - rate)",
                  "    return subtotal", ""]
    return "\n".join(lines)


MODULES = ["pricing", "discounts", "tax", "shipping", "orders"]
PROJECT = {f"src/{name}.py": module(name, 12) for name in MODULES}
PROJECT["tests/test_pricing.py"] = "from src.pricing import pricing_rule_0\n\n\ndef test_rule_0():\n    pass\n"
PROJECT["README.md"] = "# Orders\n\nPrices orders: discounts, tax, shipping.\n\n" + "Run `pytest -q`.\n" * 5


def session_script(turns: int = 20) -> tuple[list[str], list]:
    """User prompts and mock steps: each turn one or two tool round trips, then text."""
    prompts, steps = [], []
    for t in range(turns):
        name = MODULES[t % len(MODULES)]
        prompts.append(f"Question {t + 1}: what does src/{name}.py do, and where is rule {t % 12} used?")
        steps.append(reply(f"Let me read src/{name}.py.", tool_call("read_file", {"file_path": f"src/{name}.py"})))
        if t % 4 == 1:
            steps.append(reply("Now where it is used.", tool_call("grep", {"pattern": f"{name}_rule_{t % 12}\\b"})))
        elif t % 4 == 2:
            steps.append(reply(None, tool_call("glob", {"pattern": "**/*.py"}),
                               tool_call("run_command", {"command": "wc -l README.md"})))
        elif t % 4 == 3:
            steps.append(reply(None, tool_call("list_files", {"path": "src"})))
        steps.append(reply(f"src/{name}.py holds twelve rules; rule {t % 12} gives a discount above "
                           f"{100 + 10 * (t % 12)} and is only defined there."))
    return prompts, steps


def count_breakpoints(body: dict) -> int:
    text = json.dumps({k: body.get(k) for k in ("tools", "system", "messages")})
    return text.count('"cache_control"')


def main() -> int:
    checks = Checks("Day 18: cost meter, disconnects and prompt caching")
    kesi.apply_settings(kesi.Settings())     # Haiku 4.5 and the built-in price table

    print("\n# 1. Prices")
    wrong = {}
    for model, (inp, out) in LIST_PRICES.items():
        want = {"input": inp, "output": out, "cache_write": inp * 1.25, "cache_read": inp * 0.1}
        got = kesi.price_for(model)
        if any(abs(got[k] - want[k]) > 1e-9 for k in want):
            wrong[model] = got
    checks.check("haiku 1/5, sonnet 3/15, opus 4.5+ 5/25, older opus 15/75; cache write 1.25x, read 0.1x",
                 not wrong, wrong)

    prices = json.dumps({"input": 2, "output": 10, "cache_write": 2.5, "cache_read": 0.2})
    kesi.apply_settings(kesi.read_settings({"KESI_PRICES": prices}))
    kesi.METER.calls.clear()
    kesi.METER.record({"input_tokens": 1_000_000, "output_tokens": 100_000})
    overridden = kesi.METER.cost()
    kesi.apply_settings(kesi.Settings())
    kesi.METER.calls.clear()          # each request is priced once, when it is recorded
    kesi.METER.record({"input_tokens": 1_000_000, "output_tokens": 100_000})
    table = kesi.METER.cost()
    try:
        kesi.read_settings({"KESI_PRICES": "{not json"})
        refused = ""
    except kesi.SettingError as exc:
        refused = str(exc)
    checks.check(f"KESI_PRICES overrides the table (${overridden:.2f} for 1M in + 100k out)",
                 abs(overridden - 3.0) < 1e-9, overridden)
    checks.check("a malformed KESI_PRICES is refused at start-up, naming the setting; the table is the default",
                 refused.startswith("KESI_PRICES must be JSON") and table == 1.5, (refused, table))
    kesi.METER.calls.clear()

    print("\n# 2. The meter: one entry per request")
    with workspace(PROJECT), mock_client(["one", "two"]) as (mock, client):
        for prompt in ("first", "second"):
            response = client.messages.create(**kesi.request_for([{"role": "user", "content": prompt}],
                                                                 kesi.MAIN_AGENT))
            kesi.METER.record(response.usage)
        kesi.METER.record(anthropic.types.Usage(input_tokens=7, output_tokens=3))   # no cache fields
        kesi.METER.record(None)                                                    # nothing to record
        usages = [r["usage"] for r in mock.requests] + [{"input_tokens": 7, "output_tokens": 3}]
        checks.check("totals add up every request; a missing cache field counts 0; None is skipped",
                     kesi.METER.totals() == summed(usages) and len(kesi.METER.calls) == 3,
                     (kesi.METER.totals(), summed(usages)))
        checks.check(f"the cost follows the prices (${kesi.METER.cost():.6f})",
                     abs(kesi.METER.cost() - expected_cost(usages)) < 1e-12, expected_cost(usages))

    print("\n# 3. A cost line after each turn, and /cost")
    script = [reply("Let me read it.", tool_call("read_file", {"file_path": "src/tax.py"})),
              reply("It holds twelve tax rules."), reply("Yes, rule 3 applies above 130.")]
    # Sonnet 4.5's 1,024-token minimum: KeSi's prefix caches, so the bill has cache lines.
    with workspace(PROJECT), mock_client(script, min_cache_tokens=1024) as (mock, client):
        screen = kesi.UI = Screen()
        history, seen = [], 0
        for prompt in ("What is in src/tax.py?", "Does rule 3 apply above 130?"):
            kesi.run_turn(client, history, prompt)
            line = cost_lines(screen.getvalue())[-1]
            usages = [r["usage"] for r in mock.requests[seen:]]
            seen = len(mock.requests)
            numbers = {k: line[k] for k in ("input", "output", "cache_read", "cache_write")}
            checks.check(f"turn line: {line['requests']} request(s), tokens and ${line['cost']} match the API's usage",
                         line["requests"] == len(usages) and numbers == summed(usages)
                         and line["cost"] == round(expected_cost(usages), 4), (line, summed(usages)))
        all_usage = [r["usage"] for r in mock.requests]
        checks.check("the last line's session total covers both turns",
                     line["session"] == round(expected_cost(all_usage), 4), line)
        before = len(screen.getvalue())
        kesi.handle_slash("/cost", client, history)
        shown = screen.getvalue()[before:]
        totals = summed(all_usage)
        wanted = [f"{len(all_usage)} requests", f"input {totals['input']:,}", f"output {totals['output']:,}",
                  f"${expected_cost(all_usage):.4f}"]
        if totals["cache_read"] or totals["cache_write"]:    # Haiku 4.5 caches nothing under 4,096 tokens
            wanted.append(f"cache read {totals['cache_read']:,}")
        checks.check("/cost shows the session's requests, tokens, cache and total",
                     all(w in shown for w in wanted), [w for w in wanted if w not in shown])

    with workspace(PROJECT), mock_client([error(400, "prompt is too long")]) as (mock, client):
        screen = kesi.UI = Screen()
        answer = kesi.run_turn(client, [], "hello")
        checks.check("a request that fails before any usage prints no cost line",
                     not answer.ok and not cost_lines(screen.getvalue()) and not kesi.METER.calls)

    print("\n# 4. The connection breaks mid-stream")
    text = "Let me read the tax rules first."
    cut = events_through_first_block(text)
    step = reply(text, tool_call("read_file", {"file_path": "src/tax.py"}), cut_after=cut)
    with workspace(PROJECT), mock_client([step]) as (mock, client):
        screen = kesi.UI = Screen()
        history = []
        try:
            answer, escaped = kesi.run_turn(client, history, "What do the tax rules do?"), None
        except BaseException as exc:   # the check is that nothing escapes
            answer, escaped = None, exc
        checks.check("no exception escapes run_turn", escaped is None, repr(escaped))
        kept = history[-1]["content"] if escaped is None else []
        checks.check("only the completed text is kept, then the notice",
                     [b["text"] for b in kept] == [text, answer.text], kept)
        checks.check(f"the user is told the connection broke: {answer.text}",
                     "Connection reset" in answer.text and not answer.ok, answer.text)
        calls = kesi.METER.calls
        line = (cost_lines(screen.getvalue()) or [{}])[-1]
        checks.check("the usage received before the break is recorded once, marked partial",
                     len(calls) == 1 and calls[0]["partial"] and "interruption" in line.get("notes", ""),
                     (calls, line))

    print("\n# 5. Prompt caching over a 20-turn session")
    prompts, steps = session_script(20)
    # Haiku 4.5 (KeSi's default model) caches only prefixes of 4,096 tokens or more.
    with workspace(PROJECT) as root, mock_client(steps, min_cache_tokens=4096) as (mock, client):
        kesi.UI = io.StringIO()      # 20 turns of tool chatter: keep the output short
        history = []
        answers = [kesi.run_turn(client, history, prompt) for prompt in prompts]
        kesi.UI = sys.stdout
        bodies = [r["body"] for r in mock.requests]
        totals = summed([r["usage"] for r in mock.requests])
        served = totals["cache_read"] / (totals["input"] + totals["cache_read"] + totals["cache_write"])
        print(f"   {len(bodies)} requests; input {totals['input']:,}, cache write {totals['cache_write']:,}, "
              f"cache read {totals['cache_read']:,}; {served:.1%} of input served from cache")
        checks.check(f"all {len(prompts)} turns ran to a text answer",
                     all(a.ok for a in answers) and all(r["status"] == 200 for r in mock.requests),
                     [a.text for a in answers if not a.ok])
        checks.check(f"at least 80% of input tokens are read from the cache ({served:.1%})", served >= 0.80)
        checks.check("the meter agrees with the API's usage",
                     abs(kesi.METER.cache_share() - served) < 1e-12 and kesi.METER.totals() == totals)
        most = max(count_breakpoints(b) for b in bodies)
        checks.check(f"every request carries at most 4 cache breakpoints (max {most})", most <= 4)
        # KeSi's tools and rules are shorter than 4,096 tokens: a mark there could never cache.
        big = [b for b, r in zip(bodies, mock.requests) if sum(r["usage"][k] for k in (
            "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")) >= 4096]
        checks.check(f"no breakpoint on the short system prompt; one on the newest message of "
                     f"every request of 4,096 tokens or more ({len(big)} of {len(bodies)})",
                     not any("cache_control" in json.dumps(b["system"]) for b in bodies)
                     and big and all("cache_control" in b["messages"][-1]["content"][-1] for b in big))
        saved = "".join(p.read_text() for p in (records_of(root) / "sessions").glob("*.jsonl"))
        checks.check("the journal in memory and the saved session carry no cache_control",
                     "cache_control" not in json.dumps(history) and saved and "cache_control" not in saved)

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
