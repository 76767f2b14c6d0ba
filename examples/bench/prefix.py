# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (h): the fixed prefix (tool specs + rules) every request carries, next to other agents.

One method for every agent whose text we have: KeSi's own estimator,
kesi.fixed_prefix_tokens: (tool specs as compact JSON, non-ASCII escaped,
plus the characters of the rules) / 4. Claude's real tokenizer is not
public; for English text it gives somewhat more tokens than characters / 4.
KeSi is measured in a fresh workspace with its defaults (sandbox and network
lines included); the others come from prefix_sources/ (see prefix_extract.py
for where each text was taken from and at which commit). The tool-use
system prompt the API itself adds when tools are present is the same for
all and not counted.

Claude Code's text is not in prefix_sources/: its rows are its own /context
figures (Claude's tokenizer) as users published them, not re-counted.

Run: uv run examples/bench/prefix.py
"""
import json

from benchlib import HERE, kesi, quiet_kesi, table
import checklib

CLAUDE_CODE = [   # (label, system prompt, system tools, source) from Claude Code's /context output
    ("Claude Code, Sonnet 4 (/context)", 3200, 11600,
     "dannywillems.github.io/2026/01/16/claude-code-context-command.html"),
    ("Claude Code, Opus 4.5 (/context)", 2300, 19900, "velog.io/@juliy9812 (2026-02-09)"),
]


def kesi_row() -> list:
    with checklib.workspace({}):
        quiet_kesi()
        tools, system = kesi.MAIN_AGENT.tools(), kesi.system_prompt()
        return ["KeSi (this kesi.py)", len(tools), kesi.json_chars(tools) // 4,
                sum(len(b["text"]) for b in system) // 4, kesi.fixed_prefix_tokens(tools, system), "this repository"]


def stored_row(name: str, label: str) -> list:
    data = json.loads((HERE / "prefix_sources" / name).read_text(encoding="utf-8"))
    if "tools" in data:
        tools_chars, rules_chars = kesi.json_chars(data["tools"]), sum(len(t) for t in data["system"])
        count = len(data["tools"])
    else:                                       # counts only (see its note)
        tools_chars, rules_chars, count = data["tools_chars"], data["system_chars"], data["tool_count"]
    return [label, count, tools_chars // 4, rules_chars // 4, (tools_chars + rules_chars) // 4,
            f"{data['repository']} @ {data['commit'][:7]}"]


def main():
    rows = [kesi_row(),
            stored_row("kaochenlong-KeSi.json", "the author's kesi.py (day 15)"),
            stored_row("mini-swe-agent.json", "mini-swe-agent (mini.yaml)"),
            stored_row("nanocode.json", "nanocode")]
    rows += [[label, "", tools, rules, rules + tools, url] for label, rules, tools, url in CLAUDE_CODE]
    ours = rows[0][4]
    for row in rows:
        row.insert(5, f"{ours / row[4]:.2f}x")
    print("# Fixed prefix per request, in tokens (characters / 4; Claude Code rows: its own count)")
    print(table(["agent", "tools", "tool specs", "rules", "prefix", "KeSi / this", "source"], rows))


if __name__ == "__main__":
    main()
