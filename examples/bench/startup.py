# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (e): start-up: time to the first request, to the REPL prompt, and to exit.

Every number is a fresh Python process (the same interpreter and packages),
started from this one, median of N runs, interleaved so that machine load
hits every variant alike:
  import anthropic       python -c "import anthropic": the floor
  -p: first request      spawn -> the mock API receives KeSi's first request
  -p: exit after answer  the answer on stdout -> the process has exited
  REPL: prompt shown     spawn -> "you > " on a pseudo-terminal
Pass --compare OTHER_KESI_PY to time another kesi.py side by side.

Run: uv run examples/bench/startup.py [--small] [--compare /path/to/kesi.py]
"""
import os
import pty
import select
import statistics
import subprocess
import sys
import time

from benchlib import HERE, fmt, parse_args, table
import checklib
from mock_api import MockAPI

KESI = HERE.parent.parent / "kesi.py"


def child_env(mock=None) -> dict:
    """Like a user's shell: bytecode is cached (this sandbox sets PYTHONDONTWRITEBYTECODE)."""
    env = checklib.kesi_subprocess_env(mock)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_import() -> float:
    started = time.time()
    subprocess.run([sys.executable, "-c", "import anthropic"], check=True, env=child_env())
    return time.time() - started


def time_headless(kesi_py, mock, arrivals) -> tuple[float, float]:
    env = child_env(mock)
    started = time.time()
    proc = subprocess.Popen([sys.executable, str(kesi_py), "-p", "hi"], env=env, cwd=HERE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    proc.stdout.readline()                 # the answer
    answered = time.time()
    proc.wait(timeout=60)
    exited = time.time()
    return arrivals[-1] - started, exited - answered


def time_repl_prompt(kesi_py, mock) -> float:
    env = child_env(mock)
    env["TERM"] = "dumb"
    started = time.time()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(str(HERE))
        os.execve(sys.executable, [sys.executable, str(kesi_py)], env)
    seen = b""
    try:
        while b"you > " not in seen and time.time() - started < 60:
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    break
        return time.time() - started
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)


def main():
    args = parse_args(__doc__.splitlines()[0],
                      lambda p: p.add_argument("--compare", help="another kesi.py to time side by side"))
    runs = 3 if args.small else 7
    variants = {"this kesi.py": KESI}
    if args.compare:
        variants[f"compare: {args.compare}"] = args.compare
    arrivals = []

    def answer(body, n):
        arrivals.append(time.time())
        return "ok"

    samples = {"import": []}
    with MockAPI(answer) as mock:
        for path in variants.values():     # warm-up: compile and cache the bytecode once
            time_headless(path, mock, arrivals)
        for _ in range(runs):
            samples["import"].append(time_import())
            for name, path in variants.items():
                first, exit_after = time_headless(path, mock, arrivals)
                samples.setdefault((name, "first"), []).append(first)
                samples.setdefault((name, "exit"), []).append(exit_after)
                samples.setdefault((name, "repl"), []).append(time_repl_prompt(path, mock))
    floor = statistics.median(samples["import"])
    rows = [["python -c 'import anthropic'", "", fmt(floor * 1000), "1.00x"]]
    for name in variants:
        for key, label in (("first", "-p: first request"), ("repl", "REPL: prompt shown"),
                           ("exit", "-p: answer -> exit")):
            value = statistics.median(samples[(name, key)])
            ratio = f"{value / floor:.2f}x" if key != "exit" else ""
            rows.append([label, name, fmt(value * 1000), ratio])
    print(f"# Start-up, median of {runs} fresh processes (ms; ratio to import anthropic)")
    print(table(["what", "kesi.py", "ms", "vs import"], rows))
    first = statistics.median(samples[("this kesi.py", "first")]) / floor
    print(f"goal, -p first request at most 1.10x import anthropic: {'yes' if first <= 1.10 else 'NO'} ({first:.2f}x)")


if __name__ == "__main__":
    main()
