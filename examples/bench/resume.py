# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (g): resuming a big session: `kesi.py --continue` on a 50 MB session file.

A session of tool rounds (read_file results of about 4 kB each) is written
with KeSi's own save_session (append-only JSONL), then resumed in-process:
  resume          resume_session: read and check every line, seal, restore todos
  first request   manage_context + request_for on the resumed journal (the
                  token estimate starts from the size resume read off the
                  file's lines: no json.dumps of the whole journal)
  next turn       the same after one more tool round: from the mark, O(new)
Beside them, in the same run, the floor any resume of this file has:
  raw read        the file's bytes read into memory
  raw parse       read, split into lines, json.loads every line
The ratios are KeSi's resume (and resume + first request) over the raw parse. The goal: a 50 MB
session resumed, first request built, in under 1 s.
Median of 3, in seconds, for 5 / 20 / 50 MB files.

Run: uv run examples/bench/resume.py [--small]
"""
import json
import statistics
import time

from benchlib import kesi, parse_args, quiet_kesi, table
import checklib
from turns import tool_round


def big_history(megabytes: float) -> list[dict]:
    history = [{"role": "user", "content": "Read every module and summarise it."}]
    filler = "\n".join(f"{i:>6}\t    value_{i} = compute(value_{i - 1}, {i})  # step {i}" for i in range(1, 70))
    n = 0
    while len(history) < megabytes * 1e6 / 2150:
        n += 1
        rnd = tool_round(n)
        rnd[1]["content"][0]["content"] = filler
        history += rnd
    history += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "Go on."}]
    return history


def timed(func):
    started = time.perf_counter()
    result = func()
    return time.perf_counter() - started, result


def raw_parse(path) -> list:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def measure(megabytes: float, repeat: int) -> list:
    kesi.SESSION_FILE = None
    kesi.save_session(big_history(megabytes))
    path = kesi.SESSION_FILE
    rows = []
    for _ in range(repeat):
        history = []
        kesi.MAIN_AGENT.size_mark = None
        resume, ok = timed(lambda: kesi.resume_session(path, history))
        assert ok
        first, _ = timed(lambda: (kesi.manage_context(None, history, kesi.MAIN_AGENT),
                                  kesi.request_for(history, kesi.MAIN_AGENT)))
        history += tool_round(10**6)
        nxt, _ = timed(lambda: (kesi.manage_context(None, history, kesi.MAIN_AGENT),
                                kesi.request_for(history, kesi.MAIN_AGENT)))
        read, _ = timed(path.read_bytes)
        parse, _ = timed(lambda: raw_parse(path))
        rows.append((resume, first, nxt, read, parse, len(history)))
    resume, first, nxt, read, parse = (statistics.median(r[i] for r in rows) for i in range(5))
    return [f"{path.stat().st_size / 1e6:.1f} MB", f"{rows[0][5]:,}", f"{resume:.3f}", f"{first:.3f}",
            f"{resume + first:.3f}", f"{nxt * 1000:.2f} ms", f"{read:.3f}", f"{parse:.3f}",
            f"{resume / parse:.2f}x", f"{(resume + first) / parse:.2f}x", "yes" if resume + first < 1 else "NO"]


def main():
    args = parse_args(__doc__.splitlines()[0])
    sizes = [5, 20] if args.small else [5, 20, 50]
    with checklib.workspace({}):
        quiet_kesi()
        kesi.CONTEXT_WINDOW = 10**9            # a real 50 MB journal would be compacted; here we time the load
        rows = [measure(mb, 3) for mb in sizes]
    print("# Resume a session file (median of 3, seconds)")
    print(table(["file", "messages", "resume", "first request", "resume + first", "next turn", "raw read",
                 "raw parse", "resume / parse", "(resume + first) / parse", "< 1 s"], rows))


if __name__ == "__main__":
    main()
