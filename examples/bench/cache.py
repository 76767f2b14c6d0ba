# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=0.69"]
# ///
"""Bench (d): input bytes per request and the (simulated) prompt-cache hit ratio over a session.

A scripted three-prompt session (explore, search, fix and test: 12 requests
with list_files, read_file, grep, edit_file and run_command) runs through the
real agent loop against the mock API, whose cache simulation follows the
documented prefix-caching rules. The same session runs twice: with KeSi's
cache breakpoints, and with every cache_control removed, to show what the
breakpoints save. Costs use KeSi's own price table for its default model.

Run: uv run examples/bench/cache.py [--small]   (--small: a shorter session)
"""
from benchlib import kesi, parse_args, quiet_kesi, table
import checklib
from mock_api import reply, tool_call

APP = "\n".join(f"def handler_{i}(event):\n    \"\"\"Handle event kind {i}.\"\"\"\n    return event.get('id', {i})\n"
                for i in range(60)) + "\nTOTAL = handler_1({}) + handler_2({})\n"
FILES = {"README.md": "# demo\n\nA small service with sixty event handlers.\n" * 20,
         "app.py": APP, "test_app.py": "import app\nassert app.TOTAL == 3\nprint('ok')\n"}

PROMPTS = [
    ("What does this project do?", [
        reply("Let me look.", tool_call("list_files", {})),
        reply(tool_call("read_file", {"file_path": "README.md"})),
        reply(tool_call("read_file", {"file_path": "app.py"})),
        reply("It is a small service with sixty event handlers in app.py."),
    ]),
    ("Where is handler_2 used?", [
        reply(tool_call("grep", {"pattern": "handler_2\\b"})),
        reply(tool_call("read_file", {"file_path": "app.py", "offset": 1, "limit": 12})),
        reply("handler_2 is defined in app.py and used in TOTAL."),
    ]),
    ("TOTAL should be 3; fix it and run the test.", [
        reply(tool_call("read_file", {"file_path": "test_app.py"})),
        reply(tool_call("edit_file", {"file_path": "app.py", "old_string": "handler_1({}) + handler_2({})",
                                      "new_string": "1 + 2"})),
        reply(tool_call("run_command", {"command": "python3 test_app.py"})),
        reply(tool_call("glob", {"pattern": "**/*.py"})),
        reply("Fixed: TOTAL is now 1 + 2 and the test prints ok."),
    ]),
]


def without_cache_control(blocks):
    return [{k: v for k, v in block.items() if k != "cache_control"} for block in blocks]


def run_session(prompts, cached: bool):
    """Run the scripted session; returns the mock's request log."""
    script = [step for _, steps in prompts for step in steps]
    saved = kesi.with_cache_breakpoints, kesi.system_prompt
    if not cached:
        kesi.with_cache_breakpoints = list
        kesi.system_prompt = lambda rules=kesi.SYSTEM_RULES: without_cache_control(saved[1](rules))
    try:
        with checklib.workspace(FILES), checklib.mock_client(script) as (mock, client):
            quiet_kesi()
            kesi.PERMISSION_MODE = "bypassPermissions"     # no one to answer prompts here
            history = []
            for prompt, _ in prompts:
                history.append({"role": "user", "content": prompt})
                answer = kesi.run_agent(client, history)
                assert answer.ok, answer.text
            return list(mock.requests), kesi.METER.cost(), kesi.METER.cache_share()
    finally:
        kesi.with_cache_breakpoints, kesi.system_prompt = saved


def per_request_rows(requests):
    rows = []
    for r in requests:
        u = r["usage"]
        total = u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"]
        rows.append([r["n"], r["bytes"], u["input_tokens"], u["cache_creation_input_tokens"],
                     u["cache_read_input_tokens"], f"{u['cache_read_input_tokens'] / total:.0%}"])
    return rows


def main():
    args = parse_args(__doc__.splitlines()[0])
    prompts = PROMPTS[:2] if args.small else PROMPTS
    cached, cost, share = run_session(prompts, cached=True)
    plain, plain_cost, plain_share = run_session(prompts, cached=False)
    print(f"# Per request, with KeSi's cache breakpoints (model {kesi.MODEL})")
    print(table(["request", "bytes sent", "uncached in", "cache write", "cache read", "hit ratio"],
                per_request_rows(cached)))
    print("\n# Whole session")
    total_bytes = lambda log: sum(r["bytes"] for r in log)
    print(table(["variant", "requests", "bytes sent", "cache hit ratio", "input+output cost $"],
                [["KeSi breakpoints", len(cached), total_bytes(cached), f"{share:.1%}", f"{cost:.5f}"],
                 ["no cache_control", len(plain), total_bytes(plain), f"{plain_share:.1%}", f"{plain_cost:.5f}"],
                 ["ratio", "", "", "", f"{cost / plain_cost:.2f}x"]]))


if __name__ == "__main__":
    main()
