# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (j): the CPU a `kesi.py -p` process spends per request, seen from outside, at 320 and 1,280 requests.

One headless task of 1,330 tool rounds (the mock's "loop" mode: list_files in an
empty folder, over and over) against the mock API in this process. Each time a
request arrives, the mock reads the KeSi process's CPU time (user + system,
/proc/PID/stat, Linux only); the CPU per request over a band of 40 requests
is KeSi's own work plus the anthropic SDK's in that process. The context
passes half the window (old tool results are cleared) after about 1,000
requests. --compare OTHER/kesi.py runs another version after this one.

Run: uv run examples/bench/requests.py [--small] [--compare /path/to/other/kesi.py]
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import parse_args, table
import checklib
from mock_api import MockAPI, mode_script

HERE = Path(__file__).resolve().parent
BAND = 40


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_per_request(kesi_py: str, total: int) -> list[float]:
    """CPU seconds of the KeSi process when request 1, 2, ... arrived."""
    seen, loop, proc = [], mode_script("loop"), None

    def script(body, n):
        seen.append(cpu_seconds(proc.pid))
        return loop(body, n) if n < total else "done"

    with tempfile.TemporaryDirectory() as folder, MockAPI(script) as mock:
        env = checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off", KESI_MAX_TURNS=str(total + 5))
        proc = subprocess.Popen([sys.executable, kesi_py, "-p", "loop", "--permission-mode", "bypassPermissions"],
                                cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.wait(timeout=3600)
    return seen


def main():
    args = parse_args(__doc__.splitlines()[0],
                      lambda p: p.add_argument("--compare", metavar="OTHER_KESI_PY", help="another kesi.py"))
    starts = (20, 320) if args.small else (20, 320, 640, 1280)
    versions = {"this kesi.py": str(HERE.parent.parent / "kesi.py")}
    if args.compare:
        versions["compared"] = args.compare
    rows = []
    for name, path in versions.items():
        seen = cpu_per_request(path, starts[-1] + BAND + 10)
        per = {s: (seen[s + BAND] - seen[s]) / BAND * 1000 for s in starts}
        rows.append([name] + [f"{per[s]:.1f}" for s in starts] + [f"{per[starts[-1]] / per[320]:.2f}x"])
    print(f"# CPU of the kesi.py process per request (ms, bands of {BAND} requests starting at ...)")
    print(table(["kesi.py"] + [f"from {s}" for s in starts] + [f"{starts[-1]} / 320"], rows))


if __name__ == "__main__":
    main()
