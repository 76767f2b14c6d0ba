# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (b): grep / glob / list_files on a 100k-file tree, as a ratio to raw rg.

The generated project is a git repo with a .gitignore listing node_modules,
like a typical JS/Python project: 50k files under node_modules and 50k under
src/. Each KeSi tool and the plain rg command that answers the same question
run side by side in this process (median of 3 after a warm-up, page cache
warm), so the ratio compares like with like. The tree is deleted at the end.

Run: uv run examples/bench/search.py [--small]     (--small: 10k files)
"""
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import kesi, median_time, ms, parse_args, table

NEEDLE = "NEEDLE_RARE_7f3a"
NEEDLE_EVERY = 4999        # one src file in this many carries the needle
FLAT_FILES = 5000          # one flat folder, to see list_files' cap at work


def build_tree(root: Path, files: int) -> None:
    """files/2 under node_modules (100 per package), files/2 under src (python, ts,
    md), plus one flat folder of FLAT_FILES."""
    half = files // 2
    per_dir = 100
    for i in range(half):
        folder = root / "node_modules" / f"pkg{i // per_dir}" / "lib"
        if i % per_dir == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"file{i % per_dir}.js").write_text(
            f"import x from './dep{i}';\nexport function f{i}() {{ return {i}; }}\n")
    for i in range(half):
        folder = root / "src" / f"pkg{i // 1000}" / f"mod{(i // per_dir) % 10}"
        if i % per_dir == 0:
            folder.mkdir(parents=True, exist_ok=True)
        ext = (".py", ".ts", ".md")[i % 3]
        needle = f"# {NEEDLE}\n" if i % NEEDLE_EVERY == 0 else ""
        (folder / f"file{i % per_dir}{ext}").write_text(
            f"import os\n{needle}def handler_{i}(event):\n    return event.get('id', {i})\n")
    flat = root / "src" / "flat"
    flat.mkdir(parents=True)
    for i in range(FLAT_FILES):
        (flat / f"item{i:05}.txt").write_text(f"item {i}\n")
    (root / ".gitignore").write_text("node_modules/\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def rg(*args: str) -> tuple[str, bool]:
    proc = subprocess.run([kesi.RG_PATH, "--no-config", *args], cwd=kesi.BASE_DIR,
                          capture_output=True, timeout=120)
    return proc.stdout.decode("utf-8", "replace"), proc.returncode > 1


def count_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line and not line.startswith("("))


CASES = [
    # (name, KeSi call, the rg command answering the same question)
    ("grep rare word", lambda: kesi.grep(NEEDLE), lambda: rg(NEEDLE)),
    ("grep common word (every file)", lambda: kesi.grep("import"), lambda: rg("import")),
    ("grep common word, *.py only", lambda: kesi.grep("import", glob="*.py"), lambda: rg("import", "-g", "*.py")),
    ("glob **/*.py", lambda: kesi.glob_files("**/*.py"), lambda: rg("--files", "-g", "*.py")),
    ("glob **/* (everything)", lambda: kesi.glob_files("**/*"), lambda: rg("--files")),
    ("glob src/pkg0/mod0/*.py", lambda: kesi.glob_files("src/pkg0/mod0/*.py"),
     lambda: rg("--files", "src/pkg0/mod0", "-g", "*.py", "--max-depth", "1")),
    ("list_files src/flat (5,000 files)", lambda: kesi.list_files("src/flat"),
     lambda: rg("--files", "src/flat", "--max-depth", "1")),
    ("list_files src/pkg0/mod0 (100 files)", lambda: kesi.list_files("src/pkg0/mod0"),
     lambda: rg("--files", "src/pkg0/mod0", "--max-depth", "1")),
]


def main():
    args = parse_args(__doc__.splitlines()[0])
    files = 10_000 if args.small else 100_000
    root = Path(tempfile.mkdtemp(prefix="kesi-bench-tree-")).resolve()
    try:
        started = time.perf_counter()
        build_tree(root, files)
        print(f"# generated {files:,} files in {time.perf_counter() - started:.1f} s under {root}")
        kesi.BASE_DIR = root.resolve()
        rows = []
        for name, with_kesi, with_rg in CASES:
            with_kesi(), with_rg()                       # warm-up: page cache, rg binary
            kesi_time, (kesi_out, kesi_err) = median_time(with_kesi)
            rg_time, (rg_out, rg_err) = median_time(with_rg)
            assert not kesi_err and not rg_err, (name, kesi_out[:300], rg_out[:300])
            rows.append([name, ms(kesi_time), ms(rg_time), f"{kesi_time / rg_time:.2f}x",
                         len(kesi_out), len(rg_out)])
        print(f"# {files:,} files ({files // 2:,} in node_modules); times in ms, median of 3")
        print(table(["case", "kesi", "rg", "kesi / rg", "kesi chars", "rg chars"], rows))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
