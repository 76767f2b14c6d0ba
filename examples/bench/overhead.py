# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Bench (a): KeSi's own cost per turn as the history grows (10 -> 100 -> 1000 messages).

One turn = one run_agent call against the local mock API (one streamed
request, the mock answers with text). Per history length it reports:
  wall        the whole turn, as the user waits for it
  mock        time the mock server spent on the request (validation, cache
              simulation, streaming), measured inside the server
  overhead    wall - mock: KeSi + the SDK + HTTP on localhost
  kesi build  KeSi's own client-side work: manage_context + request_for
The history is a realistic tool loop (assistant tool_use / user tool_result
pairs). The context window is raised so that clearing/compaction stay out.

Run: uv run examples/bench/overhead.py [--small]
"""
import statistics
import time

from benchlib import kesi, median_time, ms, parse_args, quiet_kesi, table
import checklib
from mock_api import MockAPI


class TimedMockAPI(MockAPI):
    """The mock API, recording how long it spends on each POST."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.handle_seconds = []

    def _handle_post(self, h):
        started = time.perf_counter()
        try:
            super()._handle_post(h)
        finally:
            self.handle_seconds.append(time.perf_counter() - started)


def tool_loop_history(messages: int) -> list[dict]:
    """A prompt, then read_file rounds, ending with a tool_result (ready to send)."""
    history = [{"role": "user", "content": "Please look through the project and fix the bug."}]
    n = 0
    while len(history) < messages:
        n += 1
        history.append({"role": "assistant", "content": [
            {"type": "text", "text": f"Reading file {n}."},
            {"type": "tool_use", "id": f"toolu_{n}", "name": "read_file",
             "input": {"file_path": f"src/module_{n}.py"}}]})
        body = "\n".join(f"{i:>6}\tdef function_{n}_{i}(x): return x + {i}" for i in range(1, 9))
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": body, "is_error": False}]})
    return history


def measure(mock, client, messages: int, turns: int) -> list:
    base = tool_loop_history(messages)
    walls, mocks = [], []
    for _ in range(turns):
        history = [dict(m) for m in base]
        before = len(mock.handle_seconds)
        started = time.perf_counter()
        answer = kesi.run_agent(client, history)
        walls.append(time.perf_counter() - started)
        assert answer.ok, answer.text
        mocks.append(sum(mock.handle_seconds[before:]))

    def build():
        kesi.manage_context(client, base, kesi.MAIN_AGENT)
        return kesi.request_for(base, kesi.MAIN_AGENT)
    build_time, request = median_time(build, repeat=turns)
    wall, mock_time = statistics.median(walls), statistics.median(mocks)
    size = mock.requests[-1]["bytes"]
    return [len(base), ms(wall), ms(mock_time), ms(wall - mock_time), ms(build_time),
            size, round(size / len(base))]


def main():
    args = parse_args(__doc__.splitlines()[0])
    lengths = [10, 100, 300] if args.small else [10, 100, 1000]
    turns = 3 if args.small else 7
    quiet_kesi()
    kesi.CONTEXT_WINDOW = 10**9          # keep clearing/compaction out of the measurement
    rows = []
    with checklib.workspace({"src/module_1.py": "def f(x): return x\n"}):
        quiet_kesi()
        with TimedMockAPI(lambda body, n: "ok") as mock:
            client = kesi.anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0)
            kesi.run_agent(client, tool_loop_history(10))          # warm up the connection
            for messages in lengths:
                rows.append(measure(mock, client, messages, turns))
    print(f"# Harness overhead per turn (median of {turns} turns; times in ms)")
    print(table(["messages", "wall", "mock", "overhead", "kesi build", "request bytes", "bytes/msg"], rows))


if __name__ == "__main__":
    main()
