"""Where KeSi puts cache breakpoints and which lifetime they get, under the
real API's rules as the mock implements them: a per-model minimum prefix
(Haiku 4.5: 4,096 tokens), 5-minute and 1-hour entries on the mock's clock.
Also: token estimates that start from the last request, and project memory
that is read again only when it changes."""
import json
import time

import pytest

import checklib
import kesi
import mock_api
from mock_api import reply, tool_call

from test_cost_cache import day18


class FakeTime:
    """kesi.time with a clock the test moves on; everything else is the real module."""

    def __init__(self):
        self.offset = 0.0

    def time(self):
        return time.time() + self.offset

    def __getattr__(self, name):
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(kesi, "time", fake)
    return fake


@pytest.fixture
def screen(ws):
    return checklib.capture_ui()


def marks(body: dict) -> list[tuple[int, str]]:
    """(prefix tokens by the mock's count, ttl) of every breakpoint in a request."""
    units = mock_api._cache_units(body)
    _, totals = mock_api._prefixes(units, seed=body["model"])
    return [(totals[i], ttl) for i, (_, ttl) in enumerate(units) if ttl]


def run_day18_session(ws, mock_client, clock, turns: int, gap_minutes: float = 0.5, model="claude-haiku-4-5"):
    kesi.MODEL = model
    prompts, steps = day18.session_script(turns)
    checklib.write_files(ws, day18.PROJECT)
    mock, client = mock_client(steps, clock=lambda: clock.offset)
    history = []
    for n, prompt in enumerate(prompts):
        if n:
            clock.offset += gap_minutes * 60
        assert kesi.run_turn(client, history, prompt).ok
    assert all(r["status"] == 200 for r in mock.requests), [r["error"] for r in mock.requests]
    return mock, history


# --- the per-model minimum -------------------------------------------------------

@pytest.mark.parametrize("model, minimum", [
    ("claude-haiku-4-5", 4096), ("claude-haiku-4-5-20251001", 4096), ("claude-opus-4-5-20251101", 4096),
    ("claude-sonnet-4-5", 1024), ("claude-sonnet-4-20250514", 1024), ("claude-opus-5", 512),
    ("claude-3-5-haiku-20241022", 2048), ("anthropic.claude-haiku-4-5-20251001-v1:0", 4096),
    ("claude-sonnet-4-5@20250929", 1024), ("claude-sonnet-4-6", 1024), ("claude-opus-4-7", 2048),
    ("claude-opus-5-5", 512), ("claude-haiku-5-5-20261007", 512),
    ("some-other-vendor-model", 512), ("claude-haiku-9", 512),     # unknown: the smallest documented
])
def test_cache_minimum_per_model(model, minimum):
    assert kesi.cache_minimum(model) == minimum


def test_on_haiku_no_breakpoint_is_placed_below_4096_tokens(ws, mock_client, clock, screen, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-haiku-4-5")
    mock, _ = run_day18_session(ws, mock_client, clock, 8)
    bodies = [r["body"] for r in mock.requests]
    placed = [m for body in bodies for m in marks(body)]
    assert placed and all(tokens >= 4096 for tokens, _ in placed), placed
    assert not any("cache_control" in json.dumps(b["system"]) for b in bodies)   # the short fixed prefix
    small = [r for r in mock.requests if marks(r["body"]) == []]
    assert small and all(r["usage"]["cache_creation_input_tokens"] == 0 for r in small)
    assert max(len(marks(b)) for b in bodies) <= 4


def test_once_past_the_minimum_each_request_reads_what_the_previous_one_sent(ws, mock_client, clock, screen,
                                                                             monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "claude-haiku-4-5")
    mock, _ = run_day18_session(ws, mock_client, clock, 8)
    usage = [r["usage"] for r in mock.requests]
    size = [u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"] for u in usage]
    for before, after, u in zip(size, size[1:], usage[1:]):
        if before >= 4096 + 200:           # comfortably past the minimum by the mock's count
            assert u["cache_read_input_tokens"] == before
    assert sum(u["cache_read_input_tokens"] for u in usage) > 0.8 * sum(size)


def test_on_sonnet_the_fixed_prefix_gets_its_own_breakpoint(ws, mock_client, clock, screen, monkeypatch):
    """Sonnet 4.5 caches 1,024+ tokens: tools + rules are cached apart from the conversation,
    so a changed environment (/mode) still reads them."""
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-5")
    mock, client = mock_client(["one", "two"], clock=lambda: clock.offset)
    history = [{"role": "user", "content": "hello"}]
    kesi.run_agent(client, history)
    kesi.handle_slash("/mode readOnly", client, history)
    history.append({"role": "user", "content": "again"})
    kesi.run_agent(client, history)
    first, second = mock.requests
    assert "cache_control" in first["body"]["system"][0]                   # the rules, before the environment
    assert "cache_control" not in first["body"]["system"][-1]
    rules_prefix = marks(first["body"])[0][0]
    assert second["usage"]["cache_read_input_tokens"] == rules_prefix >= 1024


def test_an_unknown_model_is_treated_with_the_smallest_minimum(ws, mock_client, clock, screen, monkeypatch):
    """A mark under the minimum costs nothing; a cache missed costs the whole prefix."""
    monkeypatch.setattr(kesi, "MODEL", "vendor-x-large")
    mock, client = mock_client(["ok", "again"], clock=lambda: clock.offset,
                               models={"vendor-x-large": (200_000, 8192, "d", 512)})
    history = [{"role": "user", "content": "hi"}]
    assert min(m[0] for m in kesi.MODELS.values() if m[0]) == kesi.DEFAULT_CACHE_MINIMUM == 512
    kesi.run_agent(client, history)
    history.append({"role": "user", "content": "and again"})
    kesi.run_agent(client, history)
    assert "cache_control" in json.dumps(mock.requests[0]["body"]["system"])
    assert mock.requests[1]["usage"]["cache_read_input_tokens"] > 0


def test_on_opus_5_5_the_session_is_cached_from_the_first_request(ws, mock_client, clock, screen, monkeypatch):
    """Opus 5.5 caches 512+ tokens: before, as a model missing from the table, it got 4,096 and nothing was
    cached in a short session."""
    monkeypatch.setattr(kesi, "MODEL", "claude-opus-5-5")
    mock, _ = run_day18_session(ws, mock_client, clock, 3, model="claude-opus-5-5")
    usage = [r["usage"] for r in mock.requests]
    assert usage[0]["cache_creation_input_tokens"] > 0
    assert all(u["cache_read_input_tokens"] > 0 for u in usage[1:])


# --- the lifetime of an entry ---------------------------------------------------

def ttls(mock) -> list[set]:
    return [{ttl for _, ttl in marks(r["body"])} for r in mock.requests]


def test_short_pauses_write_only_5_minute_entries(ws, mock_client, clock, screen):
    mock, _ = run_day18_session(ws, mock_client, clock, 6, gap_minutes=3)
    assert set().union(*ttls(mock)) == {"5m"}
    assert sum(r["usage"]["cache_creation"]["ephemeral_1h_input_tokens"] for r in mock.requests) == 0


def test_after_a_long_pause_entries_last_an_hour_and_survive_the_next_one(ws, mock_client, clock, screen):
    kesi.MODEL = "claude-haiku-4-5"
    prompts, steps = day18.session_script(5)
    checklib.write_files(ws, day18.PROJECT)
    mock, client = mock_client(steps, clock=lambda: clock.offset)
    history, starts = [], []
    for n, (prompt, gap) in enumerate(zip(prompts, [0, 1, 12, 1, 25])):
        clock.offset += gap * 60
        starts.append(len(mock.requests))
        assert kesi.run_turn(client, history, prompt).ok
    lifetimes = ttls(mock)
    assert set().union(*lifetimes[:starts[2]]) == {"5m"}                 # no long pause seen yet
    assert all(t == {"1h"} for t in lifetimes[starts[2]:] if t)          # after the 12-minute one
    first_after_25 = mock.requests[starts[4]]["usage"]
    last_before = mock.requests[starts[4] - 1]["usage"]
    assert first_after_25["cache_read_input_tokens"] == sum(last_before[k] for k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    assert first_after_25["cache_creation"]["ephemeral_1h_input_tokens"] > 0


def test_an_hour_without_long_pauses_goes_back_to_5_minutes(clock):
    cache_clock = kesi.CacheClock()
    assert cache_clock.ttl_for_request("main") == "5m"
    clock.offset += 6 * 60
    assert cache_clock.ttl_for_request("main") == "1h"
    for _ in range(30):                     # an hour of requests 2 minutes apart
        clock.offset += 2 * 60
        cache_clock.ttl_for_request("main")
    assert cache_clock.ttl_for_request("main") == "5m"
    assert cache_clock.ttl_for_request("sub-agent") == "5m"             # kept per agent


def test_every_mark_of_a_request_has_the_same_lifetime(ws, clock):
    """A 1-hour mark may not follow a 5-minute one; one lifetime per request never breaks that."""
    history = [{"role": "user", "content": "x" * 20000}, {"role": "assistant", "content": "ok"},
               {"role": "user", "content": "y" * 20000}]
    kesi.CACHE_CLOCK.ttl_for_request("main")
    clock.offset += 10 * 60
    request = kesi.add_cache_breakpoints({"model": "claude-sonnet-4-5", "system": kesi.system_prompt(),
                                          "tools": kesi.TOOLS}, history, kesi.MAIN_AGENT)
    found = [ttl for _, ttl in marks(request)]
    assert found == ["1h", "1h", "1h"]
    assert "cache_control" not in json.dumps(history)


# --- estimates that start from the last request -----------------------------------

def test_the_estimate_starts_from_the_api_count_of_the_last_request(ws, mock_client, clock, screen):
    (ws / "a.txt").write_text("alpha\n" * 200)
    mock, client = mock_client([reply("Reading.", tool_call("read_file", {"file_path": "a.txt"})), "Done."],
                               clock=lambda: clock.offset)
    history = [{"role": "user", "content": "read a.txt"}]
    kesi.run_agent(client, history)
    usage = mock.requests[-1]["usage"]
    counted = usage["input_tokens"] + usage["cache_creation_input_tokens"] + usage["cache_read_input_tokens"]
    history.append({"role": "user", "content": "and now?"})
    sent = len(mock.requests[-1]["body"]["messages"])
    assert kesi.estimate_tokens(history, kesi.MAIN_AGENT) == counted + kesi.json_chars(history[sent:]) // 4


def test_a_rewritten_journal_is_estimated_whole_again(ws, mock_client, clock, screen):
    mock, client = mock_client(["ok"], clock=lambda: clock.offset)
    history = [{"role": "user", "content": "hello"}]
    kesi.run_agent(client, history)
    history[:] = [{"role": "user", "content": "x" * 40_000}]        # as /compact or /resume do
    whole = kesi.estimate_tokens(history, kesi.MAIN_AGENT)
    assert whole >= 10_000
    assert whole == kesi.estimate_tokens(list(history), kesi.MAIN_AGENT)   # a copy has no mark


def test_clearing_old_results_lowers_the_mark_by_what_they_freed(ws, mock_client, clock, screen, monkeypatch):
    (ws / "big.txt").write_text("line of text\n" * 600)
    steps = [reply(tool_call("read_file", {"file_path": "big.txt"})) for _ in range(6)] + ["done"]
    mock, client = mock_client(steps, clock=lambda: clock.offset)
    history = [{"role": "user", "content": "read it many times"}]
    kesi.run_agent(client, history)
    before = kesi.estimate_tokens(history, kesi.MAIN_AGENT)
    monkeypatch.setattr(kesi, "CONTEXT_WINDOW", before)
    kesi.manage_context(client, history, kesi.MAIN_AGENT)
    assert kesi.CLEARED_RESULT in json.dumps(history)
    after, whole = kesi.estimate_tokens(history, kesi.MAIN_AGENT), kesi.estimate_tokens(list(history), kesi.MAIN_AGENT)
    assert after < before * 0.8 and abs(after - whole) <= whole * 0.05     # the API count, less what was freed


# --- project memory is read again only when it changes -------------------------------

def test_memory_files_are_read_again_only_after_a_change(ws, monkeypatch):
    reads = []
    real_open = kesi.open_regular_file

    class Counting:
        def __init__(self, f):
            self.f = f

        def read(self, *args):
            reads.append(1)
            return self.f.read(*args)

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    monkeypatch.setattr(kesi, "open_regular_file", lambda target: Counting(real_open(target)))
    notes = ws / "AGENTS.md"
    notes.write_text("Rule one.\n")
    for _ in range(5):
        assert "Rule one." in kesi.system_prompt()[1]["text"]
    assert len(reads) == 1
    notes.write_text("Rule two.\n")                       # same size, new content
    assert "Rule two." in kesi.system_prompt()[1]["text"]
    notes.unlink()
    assert len(kesi.system_prompt()) == 2                  # gone: no stale memory
    notes.write_text("Rule one.\n")
    assert "Rule one." in kesi.system_prompt()[1]["text"]
