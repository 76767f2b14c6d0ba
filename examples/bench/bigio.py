# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (c): huge inputs stay bounded: read_file on a 2 GB text file, a command printing 2 GB.

Every case runs in a fresh child process, which reports its wall time and its
peak RSS (getrusage RUSAGE_SELF: the Python process running KeSi) and the
peak RSS of its biggest child process (RUSAGE_CHILDREN: rg, sh, head, ...).
The first row is the baseline: a child that only imports KeSi.

The 2 GB file is real text (a sparse file of zeros would be refused as
binary), written by repeating a 1 MB chunk, and deleted at the end. The free
disk space is checked first; --small uses 200 MB, --size-mb picks any size.

Run: uv run examples/bench/bigio.py [--small] [--size-mb N]
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import kesi, parse_args, table

CHUNK_LINES = 10_000
LINE = "line {:>9}: the quick brown fox jumps over the lazy dog, again and again ....\n"
EDIT_MB = 64                    # edit_file: above its size cap, far below the big file


def text_chunk(first_line: int) -> bytes:
    return "".join(LINE.format(first_line + i) for i in range(CHUNK_LINES)).encode()


def write_big_file(path: Path, size_mb: int) -> int:
    """About size_mb MB of numbered lines ending in one 'THE_END' line; returns the line count."""
    chunk = text_chunk(0)        # line numbers repeat per chunk: writing stays fast
    chunks = max(1, size_mb * 1_000_000 // len(chunk))
    with open(path, "wb") as f:
        for _ in range(chunks):
            f.write(chunk)
        f.write(b"THE_END\n")
    return chunks * CHUNK_LINES + 1


CHILD_CASES = {
    "baseline (import kesi only)": lambda f, n: ("", False),
    "read_file, first 2000 lines": lambda f, n: kesi.read_file(f),
    "read_file, offset = last line": lambda f, n: kesi.read_file(f, offset=n),
    "read_file, limit = 10**9": lambda f, n: kesi.read_file(f, offset=1, limit=10**9),
    "grep THE_END (rg scans it all)": lambda f, n: kesi.grep("THE_END", path=f),
    "run_command: head -c 2e9 /dev/zero | tr": lambda f, n: kesi.run_command(
        "head -c 2000000000 /dev/zero | tr '\\0' 'x'"),
    "run_command: yes": lambda f, n: kesi.run_command("yes"),
    "run_command: cat the big file": lambda f, n: kesi.run_command(f"cat {f}"),
    f"edit_file on a {EDIT_MB} MB file": lambda f, n: kesi.edit_file(
        "edit.txt", "THE_END", "THE END"),
}


def run_child(case: str, folder: Path, lines: int) -> dict:
    """In the child: run one case, report time, memory and what the model would see."""
    kesi.BASE_DIR = folder.resolve()
    kesi.UI = open(os.devnull, "w")
    started = time.perf_counter()
    output, is_error = CHILD_CASES[case]("big.txt", lines)
    seconds = time.perf_counter() - started
    tail = output.strip().splitlines()[-1][:90] if output.strip() else ""
    return {"seconds": seconds, "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
            "chars": len(output), "is_error": is_error, "tail": tail}


def pick_size(args, folder: Path) -> int:
    size_mb = args.size_mb or (200 if args.small else 2000)
    free_mb = shutil.disk_usage(folder).free // 1_000_000
    if free_mb < (size_mb + EDIT_MB) * 1.2 + 500:
        smaller = max(50, int(free_mb / 1.2) - EDIT_MB - 500)
        print(f"# only {free_mb:,} MB free: using {smaller} MB instead of {size_mb} MB")
        size_mb = smaller
    return size_mb


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        case, folder, lines = sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
        print(json.dumps(run_child(case, folder, lines)))
        return
    args = parse_args(__doc__.splitlines()[0], lambda p: p.add_argument("--size-mb", type=int))
    folder = Path(tempfile.mkdtemp(prefix="kesi-bench-big-")).resolve()
    try:
        size_mb = pick_size(args, folder)
        started = time.perf_counter()
        lines = write_big_file(folder / "big.txt", size_mb)
        write_big_file(folder / "edit.txt", EDIT_MB)
        size = (folder / "big.txt").stat().st_size
        print(f"# wrote {size / 1e9:.2f} GB ({lines:,} lines) in {time.perf_counter() - started:.1f} s")
        rows = []
        for case in CHILD_CASES:
            proc = subprocess.run([sys.executable, __file__, "--child", case, str(folder), str(lines)],
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                rows.append([case, "failed", "", "", "", "", proc.stderr.strip()[-90:]])
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append([case, r["seconds"], r["self_kb"] // 1024, r["children_kb"] // 1024,
                         r["chars"], r["is_error"], r["tail"]])
        print(f"# file: {size / 1e9:.2f} GB; each case in a fresh process")
        print(table(["case", "seconds", "peak RSS MB", "child RSS MB", "output chars", "is_error",
                     "last line of the output"], rows))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
