# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3", "pytest"]
# ///
"""A scripted tour of KeSi at a real terminal, saved as a transcript to read.

    uv run examples/tour/tour.py                  # writes examples/tour/transcript.txt
    uv run examples/tour/tour.py --out /tmp/t.txt

It builds the day 13 exercise (a shop with one failing test) in a temporary
folder, starts the local mock Messages API with a scripted model that
debugs like a careful person, and runs `kesi.py --permission-mode auto` on a
pseudo-terminal, as a person would: it types the request, asks for /cost and
leaves. In auto mode the sandbox is the boundary: the tests, the edit and the
tests again run without a question (none of them needs to leave the sandbox).
Everything KeSi printed goes into the transcript,
with terminal control sequences removed. No API key, no network.
"""
import argparse
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "day13")]
from checklib import ROOT, kesi_subprocess_env   # noqa: E402
from mock_api import MockAPI                     # noqa: E402
from ptyterm import Terminal                     # noqa: E402
import project                                   # noqa: E402
import scripted                                  # noqa: E402

REQUEST = "test_pricing keeps failing, take a look"
CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")


def readable(raw: str) -> str:
    """What a person saw: control sequences removed, carriage returns resolved."""
    lines = []
    for line in CONTROL.sub("", raw).replace("\r\n", "\n").split("\n"):
        lines.append(line.rsplit("\r", 1)[-1].rstrip())
    return "\n".join(lines).strip() + "\n"


def tour(out: Path) -> int:
    with tempfile.TemporaryDirectory(prefix="kesi-tour-") as tmp, MockAPI(scripted.debugger) as mock:
        shop = project.build(Path(tmp) / "shop")
        # The command a person would type; this Python (which has pytest) comes first on PATH.
        scripted.PYTEST = "python -m pytest -q"
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        env = kesi_subprocess_env(mock, TERM="xterm-256color", NO_COLOR="1", PATH=path,
                                  GIT_AUTHOR_NAME="You", GIT_AUTHOR_EMAIL="you@example.com",
                                  GIT_COMMITTER_NAME="You", GIT_COMMITTER_EMAIL="you@example.com")
        term = Terminal([sys.executable, ROOT / "kesi.py", "--permission-mode", "auto"], shop, env, columns=100)
        term.expect("you > ")
        term.type(REQUEST + "\n")
        term.expect("you > ")     # a question would wait here for an answer that never comes
        term.type("/cost\n")
        term.expect("you > ")
        term.type("/exit\n")
        term.close()
        code = term.proc.returncode
        text = readable(term.seen).replace(str(shop), "~/shop")
    out.write_text(f"$ cd ~/shop && uv run kesi.py --permission-mode auto\n{text}", encoding="utf-8")
    print(f"tour: {len(mock.requests)} model requests, KeSi exited with {code}; transcript in {out}")
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE / "transcript.txt")
    sys.exit(tour(parser.parse_args().out))
