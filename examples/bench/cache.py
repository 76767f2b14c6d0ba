# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (d): what prompt caching saves under a model's real cache rules, with idle gaps.

A scripted session (day 18's project: each prompt one to three tool round
trips, then an answer) runs through the real agent loop and the real SDK
against the mock API, which caches like the real API: a per-model minimum
prefix (Haiku 4.5: 4,096 tokens), 5-minute and 1-hour entries that expire on
the mock's clock, refreshed by each read, the cache_creation breakdown.
Idle gaps between prompts move that clock (and KeSi's) on without waiting;
requests inside a turn are 5 seconds apart.

Each scenario runs with five cache strategies side by side:
  KeSi            this version: marks only prefixes that reach the model's
                  minimum; 1-hour entries after a pause of 5+ minutes
  before          the previous version: two system marks and two message
                  marks on every request, always 5 minutes
  always 5m / 1h  KeSi's marks with one fixed lifetime
  none            no cache_control at all (the baseline of every ratio)
Cost: KeSi's price table for the model, with 1-hour writes at 2x input.

Run: uv run examples/bench/cache.py [--small] [--model claude-haiku-4-5]
     (--model claude-opus-5-5: a model that caches 512+ tokens, unknown to KeSi's table before issue 27)
"""
import importlib.util
import time
from pathlib import Path

from benchlib import kesi, parse_args, quiet_kesi, table
import checklib
from mock_api import cache_minimum

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("day18_check", HERE.parent / "day18" / "check.py")
day18 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day18)

MINUTE = 60
SCENARIOS = {   # idle minutes before each prompt after the first
    "interactive, mixed gaps": [2, 15, 3, 25, 1, 12, 4, 20, 2, 30, 3],
    "interactive, short gaps": [0.5, 1, 2, 3, 1, 4, 0.5, 2, 3, 1, 2],
    "headless (one task)": None,
}


class FakeTime:
    """kesi.time with a clock the bench moves on; everything else is the real module."""

    def __init__(self):
        self.offset = 0.0

    def time(self):
        return time.time() + self.offset

    def __getattr__(self, name):
        return getattr(time, name)


def before_this_version(request, history, agent):
    """The previous placement: system rules + environment, newest and third newest message."""
    for block in request["system"][-2:]:
        block["cache_control"] = {"type": "ephemeral"}
    request["messages"] = original["with_cache_breakpoints"](history, {"type": "ephemeral"}, {-1: 1, -3: 1}, 0)
    return request


def no_cache_control(request, history, agent):
    request["messages"] = list(history)
    return request


original = {"add": kesi.add_cache_breakpoints, "with_cache_breakpoints": kesi.with_cache_breakpoints,
            "ttl": kesi.CacheClock.ttl_for_request}
STRATEGIES = {
    "KeSi": {},
    "before": {"add": before_this_version},
    "always 5m": {"ttl": lambda self, label: "5m"},
    "always 1h": {"ttl": lambda self, label: "1h"},
    "none": {"add": no_cache_control},
}


def headless_task(turns: int):
    """One prompt that does the work of many: all tool rounds, one answer."""
    prompts, steps = day18.session_script(turns)
    calls = [s for s in steps if s.tools][:kesi.MAX_TURNS - 2]
    return ["Go through every module: what does each do, and where is each rule used?"], \
        calls + [steps[-1]]


def run(scenario: str, gaps, strategy: dict, model: str, turns: int):
    prompts, steps = day18.session_script(turns) if gaps else headless_task(turns)
    clock = FakeTime()
    kesi.add_cache_breakpoints = strategy.get("add", original["add"])
    kesi.CacheClock.ttl_for_request = strategy.get("ttl", original["ttl"])
    kesi.CACHE_CLOCK = kesi.CacheClock()
    saved_time, saved_stream, saved_model = kesi.time, kesi.stream_turn, kesi.MODEL
    kesi.time, kesi.MODEL = clock, model

    try:
        with checklib.workspace(day18.PROJECT), \
                checklib.mock_client(steps, clock=lambda: clock.offset) as (mock, client):
            def spaced(*args, **kwargs):        # requests inside a turn: 5 s apart
                clock.offset += 5
                return saved_stream(*args, **kwargs)
            kesi.stream_turn = spaced
            quiet_kesi()
            kesi.PERMISSION_MODE = "bypassPermissions"
            kesi.METER.calls.clear()
            history = []
            for n, prompt in enumerate(prompts):
                if n and gaps:
                    clock.offset += gaps[(n - 1) % len(gaps)] * MINUTE
                answer = kesi.run_turn(client, history, prompt)
                assert answer.ok, answer.text
            assert all(r["status"] == 200 for r in mock.requests), [r["error"] for r in mock.requests]
            return kesi.METER.cost(), kesi.METER.cache_share(), len(mock.requests), \
                sum(c["cache_write_1h"] for c in kesi.METER.calls)
    finally:
        kesi.time, kesi.stream_turn, kesi.MODEL = saved_time, saved_stream, saved_model
        kesi.add_cache_breakpoints = original["add"]
        kesi.CacheClock.ttl_for_request = original["ttl"]
        kesi.CACHE_CLOCK = kesi.CacheClock()


def main():
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--model", default="claude-haiku-4-5"))
    turns = 6 if args.small else 12
    fixed = kesi.fixed_prefix_tokens(kesi.MAIN_AGENT.tools(), kesi.system_prompt())
    print(f"# Model {args.model}: the mock caches prefixes of {cache_minimum(args.model):,}+ tokens, KeSi marks "
          f"prefixes of {kesi.cache_minimum(args.model):,}+; "
          f"KeSi's tools + system prompt are about {fixed:,} tokens (characters / 4)")
    for scenario, gaps in SCENARIOS.items():
        results = {name: run(scenario, gaps, strategy, args.model, turns) for name, strategy in STRATEGIES.items()}
        baseline = results["none"][0]
        rows = [[name, requests, f"{share:.1%}", f"{one_hour:,}", f"{cost:.5f}", f"{cost / baseline:.2f}x"]
                for name, (cost, share, requests, one_hour) in results.items()]
        label = f"{scenario}: gaps {gaps} min" if gaps else f"{scenario}: one prompt, no gaps"
        print(f"\n## {label}")
        print(table(["strategy", "requests", "read from cache", "1h writes", "cost $", "vs none"], rows))


if __name__ == "__main__":
    main()
