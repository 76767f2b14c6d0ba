# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 08 checks: grep through ripgrep.

Runs the real rg on real files: output format, the excludes, no shell and
'--' before the pattern, the caps, rg's own regex errors, a missing rg, and
a model's grep call through the agent loop and the local mock API.
Run: uv run examples/day08/check.py
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import ROOT, Checks, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import kesi                                                   # noqa: E402
from mock_api import reply, tool_call                         # noqa: E402

checks = Checks("Day 08: grep via ripgrep")

if shutil.which("rg") is None:
    checks.skip("every rg check", "ripgrep is not installed")
    out, err = kesi.grep("anything")
    checks.check("without rg, grep says how to get it instead of crashing", err and "ripgrep" in out, out)
    sys.exit(checks.finish())

KESI_SOURCE = (ROOT / "kesi.py").read_text(encoding="utf-8")
DEF_LINE = next(n for n, line in enumerate(KESI_SOURCE.splitlines(), 1) if line.startswith("def safe_path("))

with workspace({"kesi.py": KESI_SOURCE, ".env": "TOKEN=sk-hidden-8c1f\n", "node_modules/m/i.js": "safe_path\n",
                "notes.md": "call $(whoami) here\nflags: --files and --hidden\n"}) as root:
    out, err = kesi.grep("safe_path")
    lines = out.splitlines()
    checks.check("self-test: grep('safe_path') finds the definition as kesi.py:LINE:text",
                 not err and f"kesi.py:{DEF_LINE}:def safe_path(path) -> Path | None:" in lines, out[:300])
    checks.check("results carry no ./ prefix and nothing from node_modules",
                 all(line.startswith("kesi.py:") for line in lines[:-1]), lines[:3])

    plain = subprocess.run(["rg", "sk-hidden"], cwd=root, capture_output=True, text=True)
    named = subprocess.run(["rg", "sk-hidden", ".env"], cwd=root, capture_output=True, text=True)
    checks.check("raw rg: 'rg KEY' skips .env (exit 1); 'rg KEY .env' finds it (exit 0)",
                 plain.returncode == 1 and named.returncode == 0 and "sk-hidden" in named.stdout)
    out, err = kesi.grep("sk-hidden")
    out2, err2 = kesi.grep("sk-hidden", ".env")
    checks.check("grep never shows .env: not while walking, and a .env path is refused",
                 "sk-hidden-8c1f" not in out + out2 and err2, (out, out2))

    out, err = kesi.grep("$(whoami)")
    checks.check("no shell: $(whoami) is a regex, not a command ($ ends the line, so no match)",
                 (out, err) == ("No matches for $(whoami).", False), out)
    out, err = kesi.grep("--files", "notes.md")
    checks.check("'--' keeps --files a pattern: it matches text instead of listing files",
                 out == "notes.md:2:flags: --files and --hidden", out)

    out, err = kesi.grep("(?<=def )safe_path")
    checks.check("a look-behind fails and rg's own message (with the --pcre2 hint) comes back",
                 err and "look-around" in out and "--pcre2" in out, out)

    out, err = kesi.grep("x", "..")
    checks.check("a path outside the folder is refused", err, out)

outside = Path(f"/tmp/kesi-day08-outside-{os.getpid()}")
outside.mkdir(exist_ok=True)
(outside / "secret.txt").write_text("needle outside\n")
try:
    with workspace({"a.txt": "needle inside\n"}) as root:
        (root / "link-file").symlink_to(outside / "secret.txt")
        (root / "link-dir").symlink_to(outside)
        out, err = kesi.grep("needle")
        checks.check("symlinks out of the folder are not followed", out == "a.txt:1:needle inside", out)
finally:
    shutil.rmtree(outside)

with workspace({"big.txt": "".join(f"match {n}\n" for n in range(1, 151))}):
    out, _ = kesi.grep("match")
    lines = out.splitlines()
    checks.check("more than 100 matching lines: the first 100 plus a count",
                 len(lines) == 101 and lines[99] == "big.txt:100:match 100" and "150" in lines[-1], lines[-1])

with workspace({"a.txt": "x\n"}):
    saved_rg = kesi.RG_PATH
    kesi.RG_PATH = None          # as if shutil.which("rg") found nothing at start
    try:
        out, err = kesi.grep("x")
    finally:
        kesi.RG_PATH = saved_rg
    checks.check("without rg on PATH, a clear error instead of a crash", err and "ripgrep" in out, out)

# --- through the agent loop -----------------------------------------------------------

with workspace({"kesi.py": KESI_SOURCE}) as root, \
        mock_client([reply(None, tool_call("grep", {"pattern": "safe_path"})),
                     "safe_path is defined once and used by the file tools."]) as (mock, client):
    history = [{"role": "user", "content": "Where is safe_path used?"}]
    answer = kesi.run_agent(client, history)
    [result] = [b for b in history[2]["content"] if b["type"] == "tool_result"]
    checks.check("the model's grep call returns path:line:text lines",
                 result["is_error"] is False and f"kesi.py:{DEF_LINE}:" in result["content"]
                 and answer.ok and all(r["status"] == 200 for r in mock.requests), result["content"][:200])

sys.exit(checks.finish())
