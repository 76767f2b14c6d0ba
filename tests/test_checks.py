"""Every chapter check script must pass, run as its own process."""
import concurrent.futures
import os
import queue
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from checklib import with_bytecode_cache

ROOT = Path(__file__).resolve().parent.parent
CHECKS = sorted(ROOT.glob("examples/day*/check.py"))
# Started first: the checks that wait longest (on timeouts, retries, child processes), so that the
# short ones fill the other lanes meanwhile instead of the longest ending last.
LONGEST_FIRST = ["day11", "day13", "day12", "day21", "day02"]

# Every check begins by importing kesi, and with it the anthropic SDK: seconds of each check on a
# busy machine. So one Python imports the SDK once, and each check runs in a child forked from it:
# still a process of its own, with the environment, folder, arguments and stdio that
# `python examples/dayNN/check.py` would have, only with the SDK already loaded.
FORK_SERVER = r"""
import os, runpy, sys
import anthropic  # noqa: F401
requests, answers = os.fdopen(int(sys.argv[1])), os.fdopen(int(sys.argv[2]), "w")
for line in requests:
    script, stdout, stderr = line.rstrip("\n").split("\t")
    child = os.fork()
    if child == 0:
        requests.close(), answers.close()
        for fd, path in ((1, stdout), (2, stderr)):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
        sys.argv, sys.path[0] = [script], os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")
        sys.exit(0)
    print(child, file=answers, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), file=answers, flush=True)
"""


class ForkServer:
    def __init__(self):
        self.requests_read, self.requests = os.pipe()
        self.answers, self.answers_write = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FORK_SERVER, str(self.requests_read), str(self.answers_write)],
            cwd=ROOT, env=with_bytecode_cache(dict(os.environ)), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, pass_fds=(self.requests_read, self.answers_write))
        os.close(self.requests_read), os.close(self.answers_write)
        self.pending = b""

    def answer(self, seconds: float) -> int | None:
        while b"\n" not in self.pending:
            if not select.select([self.answers], [], [], seconds)[0]:
                return None
            chunk = os.read(self.answers, 4096)
            assert chunk, "the fork server ended"
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return int(line)

    def run(self, script, folder: Path, seconds: float = 600) -> tuple[int, str, str]:
        out, err = folder / "stdout", folder / "stderr"
        os.write(self.requests, f"{script}\t{out}\t{err}\n".encode())
        child = self.answer(300)                 # the first waits for the SDK's import
        code = self.answer(seconds)
        if code is None:                       # timed out: stop it, as subprocess.run's timeout would
            os.kill(child, signal.SIGKILL)
            code = self.answer(60)
        return code, out.read_text(errors="replace"), err.read_text(errors="replace")

    def stop(self):
        os.close(self.requests)
        self.proc.wait(timeout=60)
        os.close(self.answers)


@pytest.fixture(scope="module")
def check_runs(tmp_path_factory):
    """Every check script, started at once and run three at a time (a fork server each: most checks wait on
    timeouts and processes, not on a core), the longest first; each test waits for its own script's result."""
    folders = {script: tmp_path_factory.mktemp(script.parent.name) for script in CHECKS}
    servers = queue.SimpleQueue()

    def run(script):
        server = servers.get()
        try:
            return server.run(script, folders[script])
        finally:
            servers.put(server)

    started = []
    try:
        for _ in range(3):
            started.append(ForkServer())
            servers.put(started[-1])
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(started)) as pool:
            order = sorted(CHECKS, key=lambda script: (LONGEST_FIRST + [script.parent.name]).index(script.parent.name))
            yield {script: pool.submit(run, script) for script in order}
    finally:
        for server in started:
            server.stop()


@pytest.mark.parametrize("script", CHECKS, ids=[p.parent.name for p in CHECKS])
def test_check_script(script, check_runs):
    code, stdout, stderr = check_runs[script].result()
    assert code == 0, stdout[-4000:] + stderr[-4000:]
    assert " passed, 0 failed" in stdout
