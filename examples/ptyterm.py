"""kesi.py on a real pseudo-terminal, for the tests and the tour (examples/tour) that need one.

The child gets a session of its own with the pty as its controlling terminal,
as under a terminal emulator: readline is active, and Ctrl-C typed into the
pty becomes a real SIGINT for it. Every byte the child writes is kept (`raw`),
so a test can wait for text and also check what the terminal was sent.
"""
import fcntl
import os
import pty
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path


class Terminal:
    """A kesi.py process on a pty: type keys, wait for text, read every byte."""

    def __init__(self, args, cwd, env, *, columns: int = 200, rows: int = 40):
        self.master, slave = pty.openpty()
        # A wide window by default: the approval question is longer than 80
        # columns, and readline on a dumb terminal scrolls a long line sideways.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        self.proc = subprocess.Popen([str(a) for a in args], cwd=cwd, env=env,
                                     stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                                     preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)
        self.raw, self.pos = b"", 0
        self.arrived = threading.Condition()
        self.ended = False                        # the child closed the terminal
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:                       # EIO: every writer has closed the pty
                chunk = b""
            with self.arrived:
                self.raw += chunk
                self.ended = not chunk
                self.arrived.notify_all()
            if not chunk:
                return

    @property
    def seen(self) -> str:
        """Everything shown so far, as text."""
        return self.raw.decode("utf-8", errors="replace")

    def wait_for(self, *texts, after: int = 0, seconds: float = 60) -> int:
        """Wait until the texts have appeared in this order from offset `after`
        (an answer, then the next prompt); returns the offset just past the last.
        Fails if they have not after `seconds` or the terminal closed first."""
        wanted = [t.encode() if isinstance(t, str) else t for t in texts]
        deadline = time.monotonic() + seconds
        with self.arrived:
            while (end := self._find_in_order(wanted, after)) < 0:
                left = deadline - time.monotonic()
                if self.ended or left <= 0:
                    why = "the terminal closed" if self.ended else f"timed out after {seconds} s"
                    raise AssertionError(f"{why} waiting for {texts!r}; output so far:\n{self.raw[-3000:]!r}")
                self.arrived.wait(left)
        return end

    def _find_in_order(self, wanted, position: int) -> int:
        for text in wanted:
            found = self.raw.find(text, position)
            if found < 0:
                return -1
            position = found + len(text)
        return position

    def expect(self, text, timeout: float = 60) -> str:
        """Wait for text after the previous expect's match; returns all shown so far."""
        self.pos = self.wait_for(text, after=self.pos, seconds=timeout)
        return self.seen

    def wait_until_reading(self, seconds: float = 60) -> None:
        """Wait until the child sleeps waiting for keys (Linux; elsewhere at once).

        Ctrl-C typed while Python is between printing a prompt and waiting for
        keys is only noticed at the next key (CPython's readline checks for
        signals when its wait is interrupted), so a test types it once the
        child is really waiting, as a person, slower than a test, would."""
        wchan = Path(f"/proc/{self.proc.pid}/wchan")
        if not wchan.exists():
            return
        deadline = time.monotonic() + seconds
        while not any(w in wchan.read_text() for w in ("poll", "select", "tty_read", "wait_woken")):
            assert time.monotonic() < deadline and self.proc.poll() is None, f"not waiting for keys: {self.seen}"
            time.sleep(0.02)

    def type(self, keys) -> None:
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def close(self, seconds: float = 30) -> None:
        """Let the child finish (killed if it has not after `seconds`), keep
        the last of its output, and close the terminal. Closing twice is fine."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(timeout=10)
            if self.master is not None:
                os.close(self.master)
                self.master = None

    def leave(self) -> int:
        """Type /exit at KeSi's prompt and let it end; returns its exit code."""
        self.type("/exit\n")
        self.close()
        return self.proc.returncode

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc) -> None:
        """However a test ends, the child does not outlive it."""
        self.close(seconds=0 if exc[0] else 30)
