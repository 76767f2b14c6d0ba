"""A scripted model that debugs the day 13 exercise like a careful person.

Used by check.py and by the tour (examples/tour/tour.py): one move per
request, each chosen from what the previous tools returned, so it works on
any layout of the exercise. Needs examples/ on sys.path (for mock_api).
"""
import re
import sys

from mock_api import reply, tool_call

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"


def last_results(body: dict) -> list[str]:
    """Text of the tool results in the newest user message."""
    content = body["messages"][-1]["content"]
    blocks = content if isinstance(content, list) else []
    texts = [b.get("content", "") for b in blocks if b.get("type") == "tool_result"]
    return [t if isinstance(t, str) else "".join(x.get("text", "") for x in t) for t in texts]


def unnumbered(view: str) -> list[str]:
    """read_file's view without its 'number<TAB>' prefixes."""
    return [line.split("\t", 1)[1] for line in view.splitlines() if re.match(r"\s*\d+\t", line)]


def debugger(body: dict, n: int):
    """One move per request, each chosen from what the previous tools returned."""
    seen = last_results(body)
    joined = "\n".join(seen)
    if n == 1:
        return reply("I'll run the test suite first.", tool_call("run_command", {"command": PYTEST}))
    if n == 2:
        failed = re.search(r"FAILED (\S+?)::(\w+)", joined)
        if not failed:
            return reply("I could not find a failing test in the output.")
        return reply(f"{failed[2]} fails: {re.search(r'assert .*', joined)[0]}. Let me read the test "
                     "and find checkout.", tool_call("read_file", {"file_path": failed[1]}),
                     tool_call("grep", {"pattern": "def checkout"}))
    if n == 3:
        where = re.search(r"^([\w/]+\.py):\d+:def checkout", joined, re.M)
        return reply(None, tool_call("read_file", {"file_path": where[1]}))
    if n == 4:
        source = re.search(r"from (\w+) import .*tier_discount", joined)
        return reply("At exactly 1000 the total is unchanged: either no discount or extra shipping. "
                     f"tier_discount comes from {source[1]}.py.",
                     tool_call("grep", {"pattern": "def tier_discount", "glob": f"{source[1]}.py"}))
    if n == 5:
        where = re.search(r"^([\w/]+\.py):\d+:def tier_discount", joined, re.M)
        return reply(None, tool_call("read_file", {"file_path": where[1]}))
    if n == 6:
        line = next(x for x in unnumbered(joined) if re.search(r"if amount > threshold", x))
        return reply("The tiers say 'at least', but the code uses >, so exactly 1000 gets nothing.",
                     tool_call("edit_file", {"file_path": "rules.py", "old_string": line,
                                             "new_string": line.replace(" > ", " >= ")}))
    if n == 7:
        return reply(None, tool_call("run_command", {"command": PYTEST}))
    summary = re.search(r"\d+ (passed|failed).*", joined)
    return reply(f"Fixed rules.tier_discount (> became >=). pytest now says: {summary[0] if summary else joined[-200:]}")
