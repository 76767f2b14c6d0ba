"""The cost meter, the price table, and prompt caching.

Usage numbers come from the mock API's prefix-cache simulation, through the
real SDK; the 20-turn session is examples/day18/check.py's."""
import importlib.util
import io
import json
from pathlib import Path

import anthropic
import pytest

import checklib
import kesi
from mock_api import reply, tool_call

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("day18_check", ROOT / "examples" / "day18" / "check.py")
day18 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(day18)


@pytest.fixture(autouse=True)
def haiku_list_prices(monkeypatch):
    """The expected costs here use Haiku 4.5 and the built-in table, whatever the environment says."""
    monkeypatch.setattr(kesi, "MODEL", "claude-haiku-4-5")
    monkeypatch.delenv("KESI_PRICES", raising=False)


@pytest.fixture
def screen(ws):
    """What KeSi prints (kesi.UI) during the test."""
    kesi.UI = io.StringIO()
    return kesi.UI


def usage(input_tokens=0, output_tokens=0, write=0, read=0) -> dict:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": write, "cache_read_input_tokens": read}


# --- prices ------------------------------------------------------------------

@pytest.mark.parametrize("model, base", [
    ("claude-haiku-4-5", (1, 5)), ("claude-haiku-4-5-20251001", (1, 5)),
    ("claude-3-5-haiku-20241022", (0.8, 4)),
    ("claude-sonnet-4-5", (3, 15)), ("claude-sonnet-4-6", (3, 15)), ("claude-3-7-sonnet-20250219", (3, 15)),
    ("claude-opus-4-5-20251101", (5, 25)), ("claude-opus-4-6", (5, 25)), ("claude-opus-4-7", (5, 25)),
    ("claude-opus-5", (5, 25)),
    ("claude-opus-4-1-20250805", (15, 75)), ("claude-opus-4-20250514", (15, 75)),
    ("claude-3-opus-20240229", (15, 75)),
])
def test_price_table(model, base):
    inp, out = base
    assert kesi.price_for(model) == pytest.approx(
        {"input": inp, "output": out, "cache_write": inp * 1.25, "cache_write_1h": inp * 2,
         "cache_read": inp * 0.1})


def test_unknown_models_have_no_price():
    """tests/test_prices.py covers how that is shown."""
    assert kesi.price_for("some-future-model") is None


def test_kesi_prices_overrides_every_model(ws, monkeypatch):
    custom = {"input": 2, "output": 8, "cache_write": 3, "cache_read": 0.5}
    kesi.apply_settings(kesi.read_settings({"KESI_PRICES": json.dumps(custom)}))
    try:
        assert kesi.price_for("claude-opus-4-1") == {**custom, "cache_write_1h": 4}
        kesi.METER.record(usage(1_000_000, 1_000_000, 1_000_000, 1_000_000))
        assert kesi.METER.cost() == pytest.approx(2 + 8 + 3 + 0.5)
    finally:
        kesi.apply_settings(kesi.Settings())


@pytest.mark.parametrize("bad", ["{oops", '{"input": 1}', '{"input": "x", "output": 1, "cache_write": 1, '
                                 '"cache_read": 1}', "[1, 2]"])
def test_a_bad_kesi_prices_is_refused_at_start_up(bad):
    with pytest.raises(kesi.SettingError, match="KESI_PRICES must be JSON"):
        kesi.read_settings({"KESI_PRICES": bad})


# --- the meter -----------------------------------------------------------------

def test_record_accepts_sdk_usage_dicts_and_skips_none(ws, mock_client):
    mock, client = mock_client(["hello"])
    response = client.messages.create(**kesi.request_for([{"role": "user", "content": "hi"}], kesi.MAIN_AGENT))
    kesi.METER.record(response.usage)
    kesi.METER.record(anthropic.types.Usage(input_tokens=5, output_tokens=2))      # cache fields None
    kesi.METER.record({"input_tokens": 4})                                          # fields missing
    kesi.METER.record(None)
    served = mock.requests[0]["usage"]
    assert {k: v for k, v in kesi.METER.calls[0].items() if k not in ("cost", "cache_write_1h")} == {
        "input": served["input_tokens"], "output": served["output_tokens"],
        "cache_write": served["cache_creation_input_tokens"], "cache_read": served["cache_read_input_tokens"],
        "partial": False, "label": "main", "model": kesi.MODEL}
    assert [(c["input"], c["output"], c["cache_write"], c["cache_read"]) for c in kesi.METER.calls[1:]] == \
        [(5, 2, 0, 0), (4, 0, 0, 0)]


def test_totals_and_cost_since_a_turn_started(ws):
    kesi.METER.record(usage(1000, 100, 2000, 0))
    before = len(kesi.METER.calls)
    kesi.METER.record(usage(10, 50, 100, 3000))
    kesi.METER.record(usage(20, 30, 0, 3100))
    assert kesi.METER.totals(before) == {"input": 30, "output": 80, "cache_write": 100, "cache_read": 6100}
    assert kesi.METER.cost(before) == pytest.approx((30 * 1 + 80 * 5 + 100 * 1.25 + 6100 * 0.1) / 1e6)
    assert kesi.METER.cost() == pytest.approx(kesi.METER.cost(before) + (1000 + 500 + 2500) / 1e6)
    assert kesi.METER.cache_share(before) == pytest.approx(6100 / 6230)


def test_each_request_is_priced_by_its_own_model(ws):
    kesi.METER.record(usage(1_000_000), model="claude-haiku-4-5")
    kesi.METER.record(usage(1_000_000), model="claude-opus-4-5")
    assert kesi.METER.cost() == pytest.approx(1 + 5)


def test_report_wording(ws):
    kesi.METER.record(usage(1234, 56))
    assert kesi.METER.report() == "(this turn: 1 request, input 1,234, output 56, $0.0015; session $0.0015)"
    before = len(kesi.METER.calls)
    kesi.METER.record(usage(0, 10, 2000, 0), partial=True)
    kesi.METER.record(usage(0, 10, 0, 2000), label="sub-agent")
    line = kesi.METER.report(before)
    assert line.startswith("(this turn: 2 requests, input 0, output 20, cache read 2,000, cache write 2,000, $0.0028")
    assert "1 by sub-agents or compaction" in line and "1 counted only up to the interruption" in line
    assert line.endswith("; session $0.0043)")


def test_slash_cost_on_an_empty_and_a_used_session(ws, screen):
    kesi.handle_slash("/cost", None, [])
    empty = screen.getvalue()
    assert "0 requests" in empty and "input 0, output 0" in empty and "$0.0000" in empty
    assert "cache" not in empty
    kesi.METER.record(usage(100, 20, 3000, 9000))
    kesi.handle_slash("/cost", None, [])
    used = screen.getvalue()[len(empty):]
    assert "1 request this session" in used and "cache read 9,000, cache write 3,000" in used
    assert f"cache served {9000 / 12100:.0%}" in used and f"${kesi.METER.cost():.4f}" in used


def test_the_cost_line_is_printed_even_when_ctrl_c_ends_the_turn(ws, mock_client, monkeypatch, screen):
    (ws / "a.txt").write_text("a\n")
    mock, client = mock_client([reply("Reading.", tool_call("read_file", {"file_path": "a.txt"}))])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt       # e.g. Ctrl-C while run_tools starts

    monkeypatch.setattr(kesi, "run_tools", interrupted)
    history = []
    answer = kesi.run_turn(client, history, "read a.txt")
    out = screen.getvalue()
    assert not answer.ok and "(this turn: 1 request" in out
    assert history[-1]["content"][0]["content"] == kesi.STATE_UNKNOWN


# --- prompt caching -------------------------------------------------------------

@pytest.fixture
def sonnet_rules(monkeypatch):
    """These tests are about where breakpoints go, with the mock's 1,024-token
    minimum: Sonnet 4.5's. tests/test_cache_strategy.py covers Haiku's 4,096."""
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-5")


def test_breakpoints_mark_a_copy_never_the_journal(ws):
    history = [{"role": "user", "content": "first"},
               {"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                 {"type": "tool_use", "id": "t1", "name": "glob", "input": {}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]
    snapshot = json.dumps(history)
    messages = kesi.with_cache_breakpoints(history, {"type": "ephemeral"}, {-1: 1, -3: 1}, 0)
    assert json.dumps(history) == snapshot                         # the journal is untouched
    assert messages[0]["content"] == [{"type": "text", "text": "first", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in json.dumps(messages[1])
    assert messages[2]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_a_one_message_history_gets_one_message_breakpoint(ws):
    messages = kesi.with_cache_breakpoints([{"role": "user", "content": "hi"}], {"type": "ephemeral"}, {-1: 1}, 0)
    assert json.dumps(messages).count("cache_control") == 1


def run_session(ws, mock_client, turns: int, min_cache_tokens: int = 1024):
    prompts, steps = day18.session_script(turns)
    checklib.write_files(ws, day18.PROJECT)
    mock, client = mock_client(steps, min_cache_tokens=min_cache_tokens)
    history = []
    answers = [kesi.run_turn(client, history, prompt) for prompt in prompts]
    assert all(a.ok for a in answers) and all(r["status"] == 200 for r in mock.requests)
    return mock, history


def served_from_cache(mock) -> float:
    totals = day18.summed([r["usage"] for r in mock.requests])
    return totals["cache_read"] / (totals["input"] + totals["cache_read"] + totals["cache_write"])


def test_each_request_reads_everything_the_previous_one_sent(sonnet_rules, ws, mock_client, screen):
    mock, _ = run_session(ws, mock_client, 4)
    sizes = [sum(r["usage"][k] for k in ("input_tokens", "cache_creation_input_tokens",
                                         "cache_read_input_tokens")) for r in mock.requests]
    reads = [r["usage"]["cache_read_input_tokens"] for r in mock.requests]
    assert reads[1:] == sizes[:-1]


def test_without_message_breakpoints_the_cache_share_collapses(sonnet_rules, ws, mock_client, monkeypatch, screen):
    with_breakpoints = served_from_cache(run_session(ws, mock_client, 6)[0])
    checklib.fresh_state()
    monkeypatch.setattr(kesi, "with_cache_breakpoints", lambda history, *marks: list(history))
    without = served_from_cache(run_session(ws, mock_client, 6)[0])
    assert with_breakpoints >= 0.8 and without < 0.5, (with_breakpoints, without)


def test_a_changed_environment_still_reads_tools_and_rules_from_cache(sonnet_rules, ws, mock_client, screen):
    """/mode changes the environment block: the conversation after it must be
    re-read, but the tools + rules in front of it still come from the cache."""
    # Under a 1,024-token minimum (Sonnet 4.5's rule): on Haiku 4.5 (4,096) KeSi's
    # prefix is too short to cache at all, which is the cost work's business.
    mock, client = mock_client(["one", "two", "three"], min_cache_tokens=1024)
    history = [{"role": "user", "content": "hello"}]
    kesi.run_agent(client, history)
    history.append({"role": "user", "content": "same mode"})
    kesi.run_agent(client, history)
    kesi.handle_slash("/mode readOnly", client, history)
    history.append({"role": "user", "content": "new mode"})
    kesi.run_agent(client, history)
    first, same, changed = (r["usage"] for r in mock.requests)
    assert same["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 0 < changed["cache_read_input_tokens"] < first["cache_creation_input_tokens"]


def test_after_a_broken_stream_the_next_request_reads_its_prefix(sonnet_rules, ws, mock_client, screen):
    """The journal repaired after a reset keeps the prefix the broken request wrote."""
    checklib.write_files(ws, day18.PROJECT)
    mock, client = mock_client([reply("Reading.", tool_call("read_file", {"file_path": "src/tax.py"})),
                                reply("It holds twelve rules.", cut_after=5), "Twelve tax rules."],
                               min_cache_tokens=1024)   # Sonnet 4.5's minimum, as run_session uses
    history = []
    assert not kesi.run_turn(client, history, "What is in src/tax.py?").ok     # the 2nd request breaks
    assert kesi.run_turn(client, history, "Again, please.").ok
    broken, after = mock.requests[1]["usage"], mock.requests[2]["usage"]
    assert after["cache_read_input_tokens"] == sum(broken[k] for k in (
        "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
    assert [c["partial"] for c in kesi.METER.calls] == [False, True, False]
