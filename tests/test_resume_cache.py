"""The cache clock goes on in a resumed session: what it learned (a pause
outlived the 5-minute cache, so 1-hour entries pay) is saved with the session
and restored by -c / /resume. The real SDK against the mock; kesi's clock is
moved on by the test, as examples/bench/cache.py does."""
import time

import kesi
from checklib import capture_ui
from test_cache_strategy import FakeTime     # one moving clock for the cache tests

MINUTE = 60
BIG = "Explain every rule in this file. " + "rule_42 gives a discount above 100; " * 800   # past Haiku's 4,096


def ttls(request: dict) -> set:
    blocks = [b for m in request["body"]["messages"] if isinstance(m["content"], list) for b in m["content"]]
    return {b["cache_control"].get("ttl", "5m") for b in blocks + request["body"]["system"] if "cache_control" in b}


def continued_after(ws, mock_client, monkeypatch, first_gap: float, last_gap: float) -> dict:
    """One session: a prompt, another after first_gap minutes; then a fresh clock
    (a new process), -c, and a prompt last_gap minutes later. The last request."""
    clock = FakeTime()
    monkeypatch.setattr(kesi, "time", clock)
    mock, client = mock_client(["one", "two", "three"])
    capture_ui()
    history = []
    kesi.run_turn(client, history, BIG)
    clock.offset += first_gap * MINUTE
    kesi.run_turn(client, history, "and rule 7?")
    path = kesi.SESSION_FILE
    kesi.CACHE_CLOCK, kesi.SESSION_FILE, history = kesi.CacheClock(), None, []
    assert kesi.resume_session(path, history)
    clock.offset += last_gap * MINUTE
    kesi.run_turn(client, history, "and rule 8?")
    assert [r["status"] for r in mock.requests] == [200] * 3
    return mock.requests[-1]


def test_a_learned_one_hour_lifetime_survives_continue(ws, mock_client, monkeypatch):
    assert ttls(continued_after(ws, mock_client, monkeypatch, first_gap=20, last_gap=1)) == {"1h"}


def test_a_long_pause_before_continue_is_seen(ws, mock_client, monkeypatch):
    assert ttls(continued_after(ws, mock_client, monkeypatch, first_gap=1, last_gap=20)) == {"1h"}


def test_short_pauses_keep_five_minute_entries_after_continue(ws, mock_client, monkeypatch):
    assert ttls(continued_after(ws, mock_client, monkeypatch, first_gap=1, last_gap=1)) == {"5m"}


def test_a_saved_clock_from_the_future_or_of_the_wrong_kind_is_ignored():
    clock = kesi.CacheClock()
    clock.restore({"last_use": time.time() + 3600, "long_pause_at": "yesterday", "other": 1.0})
    clock.restore(["not", "a", "clock"])
    assert clock.last_use == {} and clock.long_pause_at == {}
