# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (l): the file tools on a tree of many folders, this kesi.py against another side by side.

What it watches: the per-folder checks the file tools make (is this folder a git dir under another name than
.git?). A repository of 20,000 folders with two small files each; each tool call runs on both kesi.py
modules in turn (interleaved, median of 5, page cache warm), so the ratio compares like with like.
The tree is deleted at the end.

Run: uv run examples/bench/folders.py --compare OTHER/kesi.py [--small]     (--small: 2,000 folders)
"""
import importlib.util
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import kesi, ms, parse_args, table

CASES = [
    ("grep rare word", lambda k: k.grep("NEEDLE_RARE")),
    ("grep common word (10k lines counted)", lambda k: k.grep("import")),
    ("glob **/*.py", lambda k: k.glob_files("**/*.py")),
    ("glob **/* (everything)", lambda k: k.glob_files("**/*")),
    ("glob src/*/*/ (the folders only)", lambda k: k.glob_files("src/*/*/")),
    ("list_files src/a0 (100 folders)", lambda k: k.list_files("src/a0")),
    ("read_file 4 folders deep", lambda k: k.read_file("src/a0/b50/m.py")),
]


def build_tree(root: Path, folders: int) -> None:
    for i in range(folders):
        folder = root / "src" / f"a{i // 100}" / f"b{i}"
        folder.mkdir(parents=True)
        (folder / "m.py").write_text(f"import os\n{'# NEEDLE_RARE' if i % 997 == 0 else ''}\ndef f{i}(): pass\n")
        (folder / "n.ts").write_text("export const x = 1;\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)


def load(path: str):
    spec = importlib.util.spec_from_file_location("kesi_compared", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main():
    args = parse_args(__doc__.splitlines()[0],
                      lambda p: p.add_argument("--compare", required=True, help="the other kesi.py"))
    other = load(args.compare)
    folders = 2_000 if args.small else 20_000
    root = Path(tempfile.mkdtemp(prefix="kesi-bench-folders-")).resolve()
    try:
        build_tree(root, folders)
        kesi.BASE_DIR = other.BASE_DIR = root
        rows = []
        for name, call in CASES:
            times = {kesi: [], other: []}
            for _ in range(50 if name.startswith("read_file") else 5):
                for module in (other, kesi):
                    started = time.perf_counter()
                    call(module)
                    times[module].append(time.perf_counter() - started)
            this, that = statistics.median(times[kesi]), statistics.median(times[other])
            rows.append([name, ms(that), ms(this), f"{this / that:.2f}x"])
        print(f"# {folders:,} folders, {2 * folders:,} files; ms, median (interleaved)")
        print(table(["case", "other", "this kesi.py", "this / other"], rows))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
