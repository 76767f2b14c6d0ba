# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3", "pytest"]
# ///
"""Day 13 with the real model: can KeSi fix the shop's failing test?

    uv run examples/day13/demo.py [--no-shell] [--model ID]

Needs ANTHROPIC_API_KEY (environment or .env) and costs a few cents. It builds
the project in a temporary folder, shows that it starts red, gives KeSi one
prompt, and grades the result exactly as check.py does: pytest green, the
distractor still green, and the one expected line as the only change. KeSi
runs with bypassPermissions there (nobody is at the prompt), but its commands
stay inside the sandbox. --no-shell takes run_command away, so the model
cannot run the tests and has to reason its way to the fix. The results vary
from run to run: that is the point of running it more than once.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE)]
import kesi  # noqa: E402
import project  # noqa: E402
from grading import diff_against_build, grade, last_line, passes, pytest_in  # noqa: E402

PROMPT = "Run the tests; one of them fails. Find out why and fix it."


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-shell", action="store_true", help="remove run_command from KeSi's tools")
    parser.add_argument("--model", help="model id (default: KESI_MODEL or claude-haiku-4-5)")
    args = parser.parse_args()
    try:     # the shell, the user's file, and the API key from this repository's .env
        settings = kesi.read_settings(os.environ, kesi.user_env_file(), HERE.parent.parent / ".env")
    except kesi.SettingError as exc:
        print(f"KeSi: {exc}", file=sys.stderr)
        return 2
    if not (settings.api_key or settings.auth_token):
        print(f"KeSi: {kesi.NO_KEY}", file=sys.stderr)
        return 2
    kesi.apply_settings(settings)
    kesi.MODEL = args.model or kesi.MODEL

    folder = project.build(Path(tempfile.mkdtemp(prefix="kesi-day13-")) / "shop")
    code, output = pytest_in(folder)
    print(f"before: pytest exit code {code}: {last_line(output)}")

    kesi.BASE_DIR = folder.resolve()    # the jail: the built project
    kesi.PERMISSION_MODE = "bypassPermissions"
    if args.no_shell:
        kesi.MAIN_AGENT.tool_names = tuple(n for n in kesi.MAIN_AGENT.tool_names if n != "run_command")
        print("(run_command removed: KeSi cannot run the tests this time)")
    kesi.CLIENT = kesi.make_client(settings)
    started = time.monotonic()
    kesi.run_turn(kesi.CLIENT, [], PROMPT)
    elapsed = time.monotonic() - started

    code, output = pytest_in(folder)
    print(f"\nafter: pytest exit code {code}: {last_line(output)}")
    changes, extra = diff_against_build(folder)
    for name, lines in changes.items():
        print(f"  changed {name}:" + "".join(f"\n    {line}" for line in lines))
    for name in extra:
        print(f"  added {name}")
    if not changes and not extra:
        print("  (no source file was changed)")
    result = grade(folder)
    for criterion, ok in result.items():
        print(f"  {'PASS' if ok else 'FAIL'}  {criterion}")
    print(f"{len(kesi.METER.calls)} model requests in {elapsed:.1f} s; {kesi.METER.token_text()}; "
          f"about ${kesi.METER.cost():.4f}")
    print(f"the project is left in {folder}")
    return 0 if passes(result) else 1


if __name__ == "__main__":
    sys.exit(main())
