# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (i): cache cost of a session continued with `kesi.py -c` after pauses, each prompt a new process.

Six prompts of day 18's project (one to three tool round trips each), each one
a fresh `kesi.py -p` process, every one after the first with `-c`, and an idle
gap before each. KeSi's processes run under libfaketime (`apt-get install
faketime`), so the clock KeSi itself reads has moved on by the gaps; the mock
API's cache clock is moved on by the same amount. The mock caches as the real
API does under Haiku 4.5's rules (4,096-token minimum, 5-minute and 1-hour
entries counted from the last use).

Cost is priced from the usage the mock returned (KeSi's price table), and
compared with the same requests without any cache (every prompt token at the
input price). --compare OTHER/kesi.py runs another version side by side.
Goal: a `-c` session with 20-minute gaps at most 0.30x of no cache.

The same requests (KeSi's bodies, at the times they were sent) are priced
again through a fresh copy of the mock's cache with every cache_control given
one lifetime: "always 5m", "always 1h", and "oracle", which knows the gaps:
1 hour only on a request followed by a pause of 5+ minutes, else 5 minutes.
The oracle is the floor for KeSi's breakpoints; what it saves over KeSi is the
price of not knowing, when a request is sent, whether it is a prompt's last.

--scenario many-tools: six tool round trips per prompt instead of one to
three (seven requests a prompt), closer to a working session. --detail prints
each request (tokens read, written for 5 minutes and 1 hour, uncached).

Run: uv run examples/bench/continue_cache.py [--compare /path/to/other/kesi.py] [--gaps 1 20]
         [--scenario day18|many-tools] [--detail]
"""
import copy
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import kesi, parse_args, table
import checklib
from mock_api import MockAPI, PromptCache, reply, tool_call

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("day18_check", HERE.parent / "day18" / "check.py")
day18 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day18)
PROMPTS = 6
MODEL = "claude-haiku-4-5"


def no_cache_cost(usage: dict) -> float:
    prices = kesi.price_for(MODEL)
    prompt = sum(usage.get(k, 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    return (prompt * prices["input"] + usage.get("output_tokens", 0) * prices["output"]) / 1e6


def cost(usage: dict) -> float:
    one_hour = (usage.get("cache_creation") or {}).get("ephemeral_1h_input_tokens", 0)
    return kesi.request_cost({"model": MODEL, "input": usage.get("input_tokens", 0),
                              "output": usage.get("output_tokens", 0),
                              "cache_read": usage.get("cache_read_input_tokens", 0),
                              "cache_write": usage.get("cache_creation_input_tokens", 0), "cache_write_1h": one_hour})


def many_tools_script(prompts: int) -> tuple[list[str], list]:
    """Each prompt: six tool round trips over the project, then the answer."""
    questions, steps = [], []
    for t in range(prompts):
        name, other = day18.MODULES[t % 5], day18.MODULES[(t + 2) % 5]
        questions.append(f"Task {t + 1}: check how rule {t % 12} of src/{name}.py is used and tested.")
        steps += [reply(f"Reading src/{name}.py.", tool_call("read_file", {"file_path": f"src/{name}.py"})),
                  reply(None, tool_call("grep", {"pattern": f"{name}_rule_{t % 12}\\b"})),
                  reply(None, tool_call("glob", {"pattern": "tests/*.py"})),
                  reply(None, tool_call("read_file", {"file_path": "tests/test_pricing.py"})),
                  reply(f"And src/{other}.py.", tool_call("read_file", {"file_path": f"src/{other}.py"})),
                  reply(None, tool_call("run_command", {"command": "wc -l src/*.py"})),
                  reply(f"Rule {t % 12} of src/{name}.py is defined once, used nowhere else, and untested.")]
    return questions, steps


SCENARIOS = {"day18": day18.session_script, "many-tools": many_tools_script}


def continued_session(kesi_py: str, gap_minutes: float, scenario: str = "day18") -> list[dict]:
    """Each request KeSi sent: its body, the mock's time when it came, the usage the mock answered."""
    prompts, steps = SCENARIOS[scenario](PROMPTS)
    offset, sent = 0, []
    with checklib.workspace(day18.PROJECT) as folder, MockAPI(steps) as mock:
        for n, prompt in enumerate(prompts):
            if n:
                offset += gap_minutes * 60
                mock.advance(gap_minutes * 60)
            env = checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off", KESI_MODEL=MODEL)
            argv = ["faketime", "-f", f"+{offset:.0f}", sys.executable, kesi_py, *(["-c"] if n else []),
                    "-p", prompt, "--permission-mode", "bypassPermissions"]
            done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stderr[-2000:]
            sent += [{"body": r["body"], "time": r["time"] + offset, "usage": r["usage"], "prompt": n}
                     for r in mock.requests[len(sent):]]
        assert all(r["status"] == 200 for r in mock.requests), [r["error"] for r in mock.requests]
    return sent


def with_ttl(body: dict, ttl: str) -> dict:
    """The body with every cache_control given one lifetime."""
    body = copy.deepcopy(body)
    blocks = [*body.get("tools", []), *body.get("system", [])]
    blocks += [b for m in body["messages"] if isinstance(m["content"], list) for b in m["content"]]
    for block in blocks:
        if "cache_control" in block:
            block["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return body


def priced_again(sent: list[dict], ttl_of) -> list[dict]:
    """The usage of the same requests at the same times, through a fresh cache, with ttl_of(i) for request i."""
    now = [0.0]
    cache = PromptCache(None, lambda: now[0])
    usages = []
    for i, request in enumerate(sent):
        now[0] = request["time"]
        usages.append({**cache.usage(with_ttl(request["body"], ttl_of(i))),
                       "output_tokens": request["usage"]["output_tokens"]})
    return usages


def floors(sent: list[dict]) -> dict:
    pause_after = [later["time"] - request["time"] for request, later in zip(sent, sent[1:])] + [0]
    return {"always 5m": priced_again(sent, lambda i: "5m"), "always 1h": priced_again(sent, lambda i: "1h"),
            "oracle": priced_again(sent, lambda i: "1h" if pause_after[i] >= kesi.LONG_PAUSE else "5m")}


def summary(usages: list[dict]) -> dict:
    return {"requests": len(usages), "cost": sum(map(cost, usages)), "none": sum(map(no_cache_cost, usages)),
            "1h": sum((u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens", 0) for u in usages),
            "read": sum(u.get("cache_read_input_tokens", 0) for u in usages)}


def detail(sent: list[dict]) -> str:
    rows = []
    for i, request in enumerate(sent):
        u, made = request["usage"], request["usage"].get("cache_creation") or {}
        rows.append([i + 1, request["prompt"] + 1, f"{request['time'] - sent[0]['time']:.0f}",
                     u["cache_read_input_tokens"], made.get("ephemeral_5m_input_tokens", 0),
                     made.get("ephemeral_1h_input_tokens", 0), u["input_tokens"], f"{cost(u):.5f}"])
    return table(["request", "prompt", "at (s)", "read", "written 5m", "written 1h", "uncached", "cost $"], rows)


def main():
    def extra(parser):
        parser.add_argument("--compare", metavar="OTHER_KESI_PY", help="another kesi.py, run side by side")
        parser.add_argument("--gaps", type=float, nargs="+", default=[1, 20], help="idle minutes before each -c")
        parser.add_argument("--scenario", choices=SCENARIOS, default="day18")
        parser.add_argument("--detail", action="store_true", help="print every request")
    args = parse_args(__doc__.splitlines()[0], extra)
    if shutil.which("faketime") is None:
        sys.exit("needs libfaketime's faketime command: apt-get install faketime")
    versions = {"this kesi.py": str(HERE.parent.parent / "kesi.py")}
    if args.compare:
        versions["compared"] = args.compare
    rows = []
    for gap in args.gaps:
        for name, path in versions.items():
            sent = continued_session(path, gap, args.scenario)
            if args.detail:
                print(f"\n## {name}, {gap:g}-minute gaps\n{detail(sent)}")
            variants = {name: [r["usage"] for r in sent]} | (floors(sent) if name == "this kesi.py" else {})
            for variant, usages in variants.items():
                r = summary(usages)
                rows.append([f"{gap:g} min", variant, r["requests"], f"{r['read']:,}", f"{r['1h']:,}",
                             f"{r['cost']:.5f}", f"{r['none']:.5f}", f"{r['cost'] / r['none']:.2f}x"])
    print(f"\n# {PROMPTS} prompts ({args.scenario}), each a new process (-c after the first), {MODEL} cache rules;"
          " always 5m / always 1h / oracle: this kesi.py's requests priced again")
    print(table(["gap", "kesi.py", "requests", "cache read", "1h writes", "cost $", "no cache $", "vs no cache"],
                rows))


if __name__ == "__main__":
    main()
