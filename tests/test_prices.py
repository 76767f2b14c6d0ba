"""The price table, per-TTL cache write prices, unknown models, and each
request priced once, when it is recorded (issue 12, "Prices")."""
import json

import pytest

import checklib
import kesi


@pytest.fixture
def screen(ws, monkeypatch):
    monkeypatch.delenv("KESI_PRICES", raising=False)
    return checklib.capture_ui()


def usage(inp=0, out=0, write=0, read=0, write_1h=0) -> dict:
    return {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
            "cache_creation": {"ephemeral_5m_input_tokens": write - write_1h,
                               "ephemeral_1h_input_tokens": write_1h}}


# The published rows (USD per million: input, output, 5m write, 1h write, cache read).
OFFICIAL = {
    "claude-haiku-4-5-20251001": (1, 5, 1.25, 2, 0.10),
    "claude-sonnet-4-5-20250929": (3, 15, 3.75, 6, 0.30),
    "claude-sonnet-4-6": (3, 15, 3.75, 6, 0.30),
    "claude-opus-4-5-20251101": (5, 25, 6.25, 10, 0.50),
    "claude-opus-4-8": (5, 25, 6.25, 10, 0.50),
    "claude-opus-5": (5, 25, 6.25, 10, 0.50),
    "claude-opus-4-1-20250805": (15, 75, 18.75, 30, 1.50),
    "claude-3-haiku-20240307": (0.25, 1.25, 0.30, 0.50, 0.03),     # not exactly 1.25x: the page says 0.30
    "claude-3-5-haiku-20241022": (0.80, 4, 1, 1.6, 0.08),
    "claude-fable-5-1": (10, 50, 12.5, 20, 0.25),                   # cache hits at 0.025x
    "claude-opus-5-5": (4, 20, 5, 8, 0.20),                         # cache hits at 0.05x
    "claude-sonnet-5": (2, 10, 2.5, 4, 0.20),
    "claude-haiku-5-5": (0.10, 0.50, 0.125, 0.20, 0.01),
}


@pytest.mark.parametrize("model", OFFICIAL)
def test_the_table_has_the_published_row(model, screen):
    assert kesi.price_for(model) == pytest.approx(dict(zip(kesi.PRICE_KEYS, OFFICIAL[model])))


@pytest.mark.parametrize("model", ["claude-haiku-4-5@20251001", "anthropic.claude-haiku-4-5-20251001-v1:0",
                                   "us.anthropic.claude-haiku-4-5-20251001-v1:0", "CLAUDE-HAIKU-4-5"])
def test_cloud_spellings_of_a_model_id_find_its_row(model, screen):
    assert kesi.price_for(model) == kesi.price_for("claude-haiku-4-5")


@pytest.mark.parametrize("model", ["claude-opus-4-5-turbo", "claude-haiku-4-9", "gpt-5", "llama3.1:8b", ""])
def test_a_near_miss_is_unknown_not_a_neighbours_price(model, screen):
    assert kesi.price_for(model) is None


def test_1h_writes_cost_2x_and_5m_writes_1_25x(screen):
    kesi.METER.record(usage(write=1_000_000, write_1h=400_000), model="claude-haiku-4-5")
    assert kesi.METER.cost() == pytest.approx(0.6 * 1.25 + 0.4 * 2)


def test_without_a_breakdown_every_write_is_a_5m_write(screen):
    kesi.METER.record({"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 1_000_000},
                      model="claude-sonnet-4-5")
    assert kesi.METER.cost() == pytest.approx(3.75)


def test_the_sdk_usage_object_breakdown_is_read(ws, mock_client, screen, monkeypatch):
    """Through the real SDK: a 1-hour write shows up in usage.cache_creation and is priced at 2x."""
    monkeypatch.setattr(kesi, "MODEL", "claude-sonnet-4-5")
    mock, client = mock_client(["ok"])
    request = {"model": "claude-sonnet-4-5", "max_tokens": 50, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "word " * 2000, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]}]}
    response = client.messages.create(**request)
    kesi.METER.record(response.usage)
    u = mock.requests[0]["usage"]
    assert u["cache_creation"]["ephemeral_1h_input_tokens"] == u["cache_creation_input_tokens"] > 1024
    assert kesi.METER.calls[0]["cache_write_1h"] == u["cache_creation_input_tokens"]
    assert kesi.METER.cost() == pytest.approx((u["input_tokens"] * 3 + u["output_tokens"] * 15
                                               + u["cache_creation_input_tokens"] * 6) / 1e6)


def test_haiku_5_5_bills_a_long_prompt_5x(screen):
    kesi.METER.record(usage(inp=100_000, out=1000), model="claude-haiku-5-5")
    kesi.METER.record(usage(inp=1000, read=99_001, out=1000), model="claude-haiku-5-5")
    short, long = (c["cost"] for c in kesi.METER.calls)
    assert short == pytest.approx((100_000 * 0.10 + 1000 * 0.50) / 1e6)
    assert long == pytest.approx(5 * (1000 * 0.10 + 99_001 * 0.01 + 1000 * 0.50) / 1e6)


# --- unknown models: tokens, and no made-up price -------------------------------------

def test_an_unknown_model_shows_tokens_and_says_its_price_is_unknown(ws, mock_client, screen, monkeypatch):
    monkeypatch.setattr(kesi, "MODEL", "qwen3-coder:30b")     # e.g. Ollama behind ANTHROPIC_BASE_URL
    mock, client = mock_client(["hello from elsewhere"], models={"qwen3-coder:30b": (32_768, 8192, "d", 1024)})
    kesi.run_turn(client, [], "hi")
    line = [l for l in screen.getvalue().splitlines() if "this turn" in l][-1]
    served = mock.requests[0]["usage"]
    assert f"input {served['input_tokens']:,}, output {served['output_tokens']:,}" in line
    assert "price unknown for qwen3-coder:30b" in line and "$" not in line
    kesi.handle_slash("/cost", client, [])
    shown = screen.getvalue().split("this turn")[-1]
    assert "price unknown for qwen3-coder:30b" in shown and "$0.0000" not in shown


def test_a_session_mixing_known_and_unknown_models_says_both(screen):
    kesi.METER.record(usage(inp=1_000_000), model="claude-haiku-4-5")
    kesi.METER.record(usage(inp=1_000_000), model="local-model")
    assert kesi.METER.cost_text() == "$1.0000 + price unknown for local-model"


def test_kesi_prices_prices_an_unknown_model(screen, monkeypatch):
    monkeypatch.setattr(kesi, "PRICE_OVERRIDE", kesi.price_override(json.dumps({"input": 0.5, "output": 1, "cache_write": 0.6,
                                                  "cache_read": 0.05, "cache_write_1h": 0.9})))
    kesi.METER.record(usage(inp=1_000_000, out=1_000_000, write=2_000_000, write_1h=1_000_000,
                            read=1_000_000), model="local-model")
    assert kesi.METER.cost() == pytest.approx(0.5 + 1 + 0.6 + 0.9 + 0.05)
    assert kesi.METER.cost_text() == "$3.0500"


# --- each request is priced once ---------------------------------------------------

def test_each_request_is_priced_when_recorded_and_never_again(screen, monkeypatch):
    kesi.METER.record(usage(inp=1_000_000), model="claude-haiku-4-5")
    monkeypatch.setattr(kesi, "PRICE_OVERRIDE", kesi.price_override(json.dumps({"input": 7, "output": 7, "cache_write": 7, "cache_read": 7})))
    kesi.METER.record(usage(inp=1_000_000), model="claude-haiku-4-5")
    calls = []
    monkeypatch.setattr(kesi, "price_for", lambda *a: calls.append(a))
    for _ in range(3):
        kesi.METER.report(1)
        kesi.METER.cost()
    assert kesi.METER.cost() == pytest.approx(1 + 7) and calls == []
