# /// script
# requires-python = ">=3.11"
# dependencies = []
# ///
"""Day 12's failing API: the shared mock (examples/mock_api.py) in one mode.

Point KeSi at it with ANTHROPIC_BASE_URL to watch the SDK's retries and
KeSi's own loop limits without spending money or waiting for a real rate
limit. Every request prints one line: its retry count (the SDK's
x-stainless-retry-count), its size and the time since the previous one.

    MOCK_MODE=429 uv run examples/day12/mock.py
    ANTHROPIC_BASE_URL=http://127.0.0.1:8799 ANTHROPIC_API_KEY=test-key uv run kesi.py

Settings (environment):
    MOCK_MODE         the behaviour (default loop); the list is printed by --help
    MOCK_PORT         default 8799
    MOCK_FAILURES     for 500-then-ok: how many 500s first (default 2)
    MOCK_RETRY_AFTER  for 429-after: seconds (default 1)

examples/day12/check.py starts its own mock; run this one to try a mode by hand.
"""
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from mock_api import MODES, MockAPI, mode_script, serve   # noqa: E402


def main() -> int:
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        print(__doc__)
        print("Modes:")
        for name, what in MODES.items():
            print(f"  {name:<12} {what}")
        return 0
    mode = os.environ.get("MOCK_MODE", "loop")
    if mode not in MODES:
        print(f"Unknown MOCK_MODE {mode!r}. One of: {', '.join(MODES)}", file=sys.stderr)
        return 2
    script = mode_script(mode, failures=os.environ.get("MOCK_FAILURES", "2"),
                         retry_after=os.environ.get("MOCK_RETRY_AFTER", "1"))
    return serve(MockAPI(script, port=int(os.environ.get("MOCK_PORT", "8799")), echo=True), mode)


if __name__ == "__main__":
    sys.exit(main())
