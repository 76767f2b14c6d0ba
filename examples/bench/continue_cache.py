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

Run: uv run examples/bench/continue_cache.py [--compare /path/to/other/kesi.py] [--gaps 1 20]
"""
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

from benchlib import kesi, parse_args, table
import checklib
from mock_api import MockAPI

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


def continued_session(kesi_py: str, gap_minutes: float) -> dict:
    prompts, steps = day18.session_script(PROMPTS)
    offset = 0
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
        assert all(r["status"] == 200 for r in mock.requests), [r["error"] for r in mock.requests]
        usages = [r["usage"] for r in mock.requests]
    return {"requests": len(usages), "cost": sum(map(cost, usages)), "none": sum(map(no_cache_cost, usages)),
            "1h": sum((u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens", 0) for u in usages),
            "read": sum(u.get("cache_read_input_tokens", 0) for u in usages)}


def main():
    def extra(parser):
        parser.add_argument("--compare", metavar="OTHER_KESI_PY", help="another kesi.py, run side by side")
        parser.add_argument("--gaps", type=float, nargs="+", default=[1, 20], help="idle minutes before each -c")
    args = parse_args(__doc__.splitlines()[0], extra)
    if shutil.which("faketime") is None:
        sys.exit("needs libfaketime's faketime command: apt-get install faketime")
    versions = {"this kesi.py": str(HERE.parent.parent / "kesi.py")}
    if args.compare:
        versions["compared"] = args.compare
    rows = []
    for gap in args.gaps:
        for name, path in versions.items():
            r = continued_session(path, gap)
            rows.append([f"{gap:g} min", name, r["requests"], f"{r['read']:,}", f"{r['1h']:,}",
                         f"{r['cost']:.5f}", f"{r['none']:.5f}", f"{r['cost'] / r['none']:.2f}x"])
    print(f"# {PROMPTS} prompts, each a new process (-c after the first), {MODEL} cache rules")
    print(table(["gap", "kesi.py", "requests", "cache read", "1h writes", "cost $", "no cache $", "vs no cache"],
                rows))


if __name__ == "__main__":
    main()
