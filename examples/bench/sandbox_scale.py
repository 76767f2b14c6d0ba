# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (i): a sandboxed `true` in a small and in a big workspace (goal: big / small at most 2x).

Both workspaces are git repositories made in a temp dir: a `.env`, a `src/` and a
node_modules-like tree of packages, one small file per folder; the small one has 100
folders, the big one 60,000 (--small: 6,000). Each `true` goes through KeSi's real
run_command path (permission bookkeeping, audit log, git guard before and after,
sandbox arguments, bubblewrap). The first command in a workspace builds KeSi's
workspace index and is shown on its own; then the median of 7.

Run: uv run examples/bench/sandbox_scale.py [--small]
"""
import subprocess
import tempfile
import time
from pathlib import Path

from benchlib import kesi, median_time, ms, parse_args, quiet_kesi, table
import checklib


def make_workspace(root: Path, folders: int) -> None:
    """A repository with `folders` folders: a quarter in src/, the rest two per package in node_modules/."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".env").write_text("TOKEN=x\n")
    made = 0
    for i in range(folders // 4):
        folder = root / "src" / f"part{i // 100}" / f"mod{i}"
        folder.mkdir(parents=True)
        (folder / "index.py").write_text("x = 1\n")
        made += 1
    package = 0
    while made < folders:
        lib = root / "node_modules" / f"pkg{package}" / "lib"
        lib.mkdir(parents=True)
        (lib / "index.js").write_text("module.exports = 1\n")
        made, package = made + 2, package + 1


def count_folders(root: Path) -> int:
    return sum(1 for path in root.rglob("*") if path.is_dir() and ".git" not in path.parts)


def measure(root: Path) -> tuple[float, float]:
    """(first command, median of the next 7) of a sandboxed `true`, in seconds."""
    checklib.fresh_state()
    checklib.use_base_dir(root)
    quiet_kesi()

    def run():
        text, failed = kesi.run_command("true")
        assert not failed, text

    started = time.perf_counter()
    run()
    first = time.perf_counter() - started
    median, _ = median_time(run, repeat=7)
    return first, median


def main():
    args = parse_args(__doc__)
    if kesi.sandbox_kind() != "bubblewrap":
        raise SystemExit("needs a usable bubblewrap (Linux)")
    sizes = [100, 6_000 if args.small else 60_000]
    rows, medians = [], []
    with tempfile.TemporaryDirectory(prefix="kesi-bench-scale-") as temp:
        for size in sizes:
            root = Path(temp, f"ws{size}").resolve()
            make_workspace(root, size)
            first, median = measure(root)
            medians.append(median)
            rows.append([f"{count_folders(root):,}", ms(first), ms(median)])
    print(table(["folders", "first command (ms)", "median of 7 (ms)"], rows))
    print(f"big / small: {medians[1] / medians[0]:.2f}x (goal: at most 2x)")


if __name__ == "__main__":
    main()
