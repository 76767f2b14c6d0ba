# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Show the sandbox KeSi would wrap around run_command here, or try a command in it.

    uv run examples/day15/profile.py                 # the policy, for this folder and machine
    uv run examples/day15/profile.py --seatbelt      # the macOS profile, on any platform
    uv run examples/day15/profile.py --try 'cat ~/.ssh/config'

The policy is generated, not kept as a file in the repo: it depends on your
home folder, the working directory and which toolchains are installed. On
macOS it prints the Seatbelt profile (paths stay (param "NAME"), filled in by
-D arguments, listed on stderr); on Linux the bubblewrap command line. --try
runs a command with exactly the argv and environment run_command uses.
"""
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import checklib  # noqa: E402,F401  (puts kesi.py on sys.path)
import kesi      # noqa: E402


def show_seatbelt() -> None:
    profile, params = kesi.sandbox_spec()
    print(profile)
    for name, value in params:
        print(f"# -D {name}={value}", file=sys.stderr)


def show_bwrap() -> None:
    argv = kesi.shell_argv("COMMAND")
    print(argv[0])
    args = iter(argv[1:])
    for arg in args:                # one option and its operands per line
        if arg.startswith("--") and arg in OPERANDS:
            print("  " + " ".join([arg, *(next(args) for _ in range(OPERANDS[arg]))]))
        else:
            print("  " + arg)


# bwrap options and how many operands each takes (the ones KeSi uses).
OPERANDS = {"--ro-bind": 2, "--bind": 2, "--dev-bind": 2, "--ro-bind-try": 2, "--bind-try": 2,
            "--tmpfs": 1, "--proc": 1, "--dev": 1, "--dir": 1, "--chdir": 1, "--setenv": 2,
            "--unsetenv": 1, "--cap-drop": 1, "--remount-ro": 1, "--symlink": 2, "--file": 2,
            "--ro-bind-data": 2, "--perms": 1}


def try_command(command: str) -> int:
    print(f"# working directory: {kesi.BASE_DIR}\n# sandbox: {kesi.sandbox_status()}\n# command: {command}\n")
    proc = subprocess.run(kesi.shell_argv(command), cwd=kesi.BASE_DIR, env=kesi.sandbox_environment(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace")
    sys.stdout.write(kesi.visible(proc.stdout))
    sys.stderr.write(kesi.visible(proc.stderr))
    print(f"\n(exit code {proc.returncode})")
    return proc.returncode


def main(argv: list[str]) -> int:
    if argv[:1] == ["--try"] and len(argv) == 2:
        return try_command(argv[1])
    if argv == ["--seatbelt"]:
        show_seatbelt()
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    kind = kesi.sandbox_kind()
    print(f"# sandbox: {kesi.sandbox_status()}", file=sys.stderr)
    if kind == "seatbelt":
        show_seatbelt()
    elif kind == "bubblewrap":
        show_bwrap()
    else:
        print("# no sandbox here: commands would run as plain /bin/sh -c", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
