# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3"]
# ///
"""Day 17 checks: streaming, and Ctrl-C or an error in the middle of a stream.

Everything goes through the real SDK and real SSE from the local mock API.
A Ctrl-C is a real SIGINT, raised in this process at a chosen SDK event (the
SDK's own stream is wrapped only to know *when*), or from a timer while the
mock is still silent. The mid-stream API error is a real SSE `error` event.

Run: uv run examples/day17/check.py

The helpers CtrlC, Screen and ErrorMidStream are also used by
tests/test_streaming.py.
"""
import contextlib
import os
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checklib import Checks, workspace, mock_client   # noqa: E402  (also puts kesi + mock_api on sys.path)
import anthropic                                        # noqa: E402
import kesi                                             # noqa: E402
from mock_api import MockAPI, reply, tool_call, mode_script   # noqa: E402


# --- helpers -------------------------------------------------------------------

@contextlib.contextmanager
def ctrl_c_raises():
    """Make sure SIGINT becomes KeyboardInterrupt (a background job may ignore it)."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def press_ctrl_c() -> None:
    """A real SIGINT to this process; Python's handler raises KeyboardInterrupt here."""
    with ctrl_c_raises():
        signal.raise_signal(signal.SIGINT)


def ctrl_c_once_the_mock_has_the_request(mock) -> threading.Thread:
    """SIGINT this process as soon as the mock logs a request (it then delays
    its answer), so the key lands while the SDK waits for the first byte."""
    def watch():
        while not mock.requests:
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    return watcher


def event_name(event) -> str:
    delta = getattr(event, "delta", None)
    return f"{event.type}:{delta.type}" if event.type == "content_block_delta" else event.type


@dataclass
class CtrlC:
    """Ctrl-C at the nth SDK event whose name is `at` (e.g. 'content_block_delta:input_json_delta';
    '*' counts every event).

    attach(client) watches the streams kesi.open_stream opens for that client:
    the real SDK stream over the real socket, event by event. The SDK has
    already folded the event into its snapshot when the key is "pressed", as
    in real life; KeSi never sees that event. It fires once. Reads of the
    snapshot are counted.
    """
    at: str | None = None
    nth: int = 1
    timeline: list = field(default_factory=list)   # event names, and screen writes (see Screen)
    snapshot_reads: int = 0
    fired: bool = False

    def attach(self, client):
        if not hasattr(kesi.open_stream, "plans"):       # once: streams of other clients pass through
            real_open = kesi.open_stream

            @contextlib.contextmanager
            def open_stream(client, request):
                with real_open(client, request) as active:
                    plan = open_stream.plans.get(client)
                    yield active if plan is None else WatchedStream(active, plan)

            open_stream.plans = weakref.WeakKeyDictionary()
            kesi.open_stream = open_stream
        kesi.open_stream.plans[client] = self
        return client

    def should_fire(self, name: str) -> bool:
        if self.fired or self.at not in (name, "*"):
            return False
        self.nth -= 1
        self.fired = self.nth == 0
        return self.fired


class WatchedStream:
    """The SDK's MessageStream, passed through, with a Ctrl-C at the planned event."""

    def __init__(self, real, plan: CtrlC):
        self._real, self._plan = real, plan

    def __iter__(self):
        for event in self._real:
            name = event_name(event)
            self._plan.timeline.append(name)
            if self._plan.should_fire(name):
                press_ctrl_c()
            yield event

    @property
    def current_message_snapshot(self):
        self._plan.snapshot_reads += 1
        return self._real.current_message_snapshot

    def __getattr__(self, name):
        return getattr(self._real, name)


class Screen:
    """Stands in for kesi.UI: keeps every write (and still shows it)."""

    def __init__(self, timeline: list | None = None):
        self.writes: list[str] = []
        self.timeline = timeline if timeline is not None else []

    def write(self, text: str) -> int:
        if text:
            self.writes.append(text)
            self.timeline.append(("screen", text))
            sys.stdout.write(text)
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def text(self) -> str:
        return "".join(self.writes)


class ErrorMidStream(MockAPI):
    """The mock, but its streams end with an SSE `error` event (overloaded_error)
    right after the first content block is complete, as the real API may do."""

    def _send_stream(self, h, events, cut_after, headers):
        cut = next(i for i, (name, _) in enumerate(events) if name == "content_block_stop") + 1
        failure = ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
        super()._send_stream(h, events[:cut] + [failure], cut_after, headers)


def dangling_tool_uses(history: list[dict]) -> list[str]:
    """tool_use ids not answered by a tool_result in the very next message."""
    missing = []
    for i, message in enumerate(history):
        if message["role"] != "assistant" or isinstance(message["content"], str):
            continue
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        following = history[i + 1]["content"] if i + 1 < len(history) else []
        answered = {b.get("tool_use_id") for b in following if isinstance(b, dict)}
        missing += [u for u in uses if u not in answered]
    return missing


def accepted_by_mock(client, history: list[dict]) -> str | None:
    """Send the repaired journal plus a follow-up; the strict mock 400s a bad one."""
    follow_up = history + [{"role": "user", "content": "Go on, please."}]
    try:
        return client.messages.create(**kesi.request_for(follow_up, kesi.MAIN_AGENT)).stop_reason
    except anthropic.BadRequestError as exc:
        return f"rejected: {exc}"


def blocks(history: list[dict], role: str = "assistant") -> list[dict]:
    return [b for m in history if m["role"] == role and isinstance(m["content"], list) for b in m["content"]]


WRITE_HELLO = tool_call("write_file", {"file_path": "hello.py", "content": "print('hello')\n"})
PLAN_TEXT = "I'll create hello.py now."


def interrupted_run(at: str, nth: int = 1):
    """One streamed run_agent with Ctrl-C at the planned event, in a fresh workspace."""
    with workspace({}) as root, mock_client([reply(PLAN_TEXT, WRITE_HELLO)]) as (mock, client):
        plan = CtrlC(at, nth)
        history = [{"role": "user", "content": "Create hello.py that prints hello."}]
        answer = kesi.run_agent(plan.attach(client), history)
        stop_reason = accepted_by_mock(client, history)
        return history, answer, plan, stop_reason, (root / "hello.py").exists(), list(kesi.METER.calls)


def main() -> int:
    checks = Checks("Day 17: streaming and interrupted streams")

    print("\n# 1. A streamed run leaves a well-formed journal")
    with workspace({}), mock_client(mode_script("fail")) as (mock, client):
        history = [{"role": "user", "content": "Read missing-file.txt"}]
        kesi.run_agent(client, history)
        roles = [m["role"] for m in history]
        checks.check(f"user and assistant alternate ({len(history)} messages)",
                     len(history) == 8 and all(a != b for a, b in zip(roles, roles[1:])), roles)
        checks.check("no tool_use is left without its tool_result", not dangling_tool_uses(history))
        checks.check("every request asked for a stream", all(r["body"].get("stream") is True for r in mock.requests))

    print("\n# 2. Text is printed as it arrives")
    with workspace({}), mock_client([reply("Streaming sends the answer in small pieces.")]) as (mock, client):
        plan = CtrlC()                  # never fires: only watches the events
        kesi.UI = Screen(plan.timeline)
        kesi.run_agent(plan.attach(client), [{"role": "user", "content": "hi"}])
        pieces = [x for x in kesi.UI.writes if x not in ("KeSi > ", "\n")]
        first_print = plan.timeline.index(("screen", pieces[0])) if pieces else -1
        checks.check(f"the text is printed in several pieces ({len(pieces)})", len(pieces) >= 2, pieces)
        checks.check("the first piece is on screen before the stream has ended",
                     0 <= first_print < plan.timeline.index("message_stop"), plan.timeline)

    print("\n# 3. Ctrl-C mid-stream keeps only complete blocks")
    history, answer, plan, stop, wrote, calls = interrupted_run("content_block_delta:input_json_delta", 2)
    kept = blocks(history)
    checks.check("Ctrl-C during the tool's JSON: the text is kept, the half tool_use is not",
                 [b["type"] for b in kept] == ["text"] and kept[0]["text"] == PLAN_TEXT
                 and len(history) == 3 and not answer.ok, history)
    checks.check("the half-written tool did not run, and nothing dangles",
                 not wrote and not dangling_tool_uses(history))
    checks.check("the interrupted request is on the meter, marked partial",
                 len(calls) == 1 and calls[0]["partial"], calls)
    checks.check("the repaired journal is accepted by the mock", stop == "end_turn", stop)

    history, answer, plan, stop, wrote, calls = interrupted_run("content_block_delta:text_delta", 2)
    checks.check("Ctrl-C mid-text: the half sentence shown on screen is not kept",
                 len(history) == 2 and history[1]["content"] == answer.text and stop == "end_turn", history)

    history, answer, plan, stop, wrote, calls = interrupted_run("message_delta")
    results = blocks(history, "user")
    checks.check("Ctrl-C after the tool_use was complete: it is kept and answered 'state unknown'",
                 [b["type"] for b in blocks(history)] == ["text", "tool_use"]
                 and len(results) == 1 and results[0]["content"] == kesi.STATE_UNKNOWN
                 and results[0]["is_error"] and not dangling_tool_uses(history), history)
    checks.check("... and the tool itself never ran; the journal is accepted", not wrote and stop == "end_turn",
                 (wrote, stop))

    history, answer, plan, stop, wrote, calls = interrupted_run("message_start")
    checks.check("Ctrl-C before message_start: 2 messages, the snapshot is never read",
                 len(history) == 2 and plan.snapshot_reads == 0 and not calls and stop == "end_turn",
                 (history, plan.snapshot_reads, calls))

    with workspace({}), mock_client([reply("Too late.", delay=3.0)]) as (mock, client), ctrl_c_raises():
        history = [{"role": "user", "content": "hi"}]
        ctrl_c_once_the_mock_has_the_request(mock)
        answer = kesi.run_agent(client, history)
        checks.check("Ctrl-C while still waiting for the response: 2 messages, nothing metered",
                     len(history) == 2 and not answer.ok and not kesi.METER.calls, history)

    print("\n# 4. An API error in the middle of the stream")
    with workspace({}) as root, ErrorMidStream([reply(PLAN_TEXT, WRITE_HELLO)]) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key", max_retries=0)
        kesi.UI = Screen()
        history = [{"role": "user", "content": "Create hello.py that prints hello."}]
        answer = kesi.run_agent(client, history)
        kept = blocks(history)
        checks.check("only the completed text is kept, plus the error notice; no tool_use",
                     len(history) == 2 and [b["text"] for b in kept] == [PLAN_TEXT, answer.text]
                     and not (root / "hello.py").exists(), history)
        checks.check("the user is told what happened", f"KeSi > {answer.text}" in kesi.UI.text()
                     and "Overloaded" in answer.text and not answer.ok, answer.text)
        stop = accepted_by_mock(client, history)
        checks.check("the repaired journal is accepted by the mock", stop == "end_turn", stop)

    return checks.finish()


if __name__ == "__main__":
    sys.exit(main())
