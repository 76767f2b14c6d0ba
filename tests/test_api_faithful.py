"""The mock follows the real API's documented rules where they change cost or
behaviour: prompt caching (per-model minimum, TTLs, the cache_creation
breakdown, invalidation, the 20-block lookback), the SSE event shape and the
error shape. Everything goes through the real SDK over HTTP."""
import anthropic
import pytest

from mock_api import cache_minimum, error

WORDS = "lorem ipsum dolor sit amet " * 10          # 270 characters, about 68 tokens


def block(tokens: int, tag: str = "", ttl: str | None = None) -> dict:
    text = (tag + " " + WORDS * (tokens // 60 + 1))[: tokens * 4]
    marked = {"type": "text", "text": text}
    if ttl:
        marked["cache_control"] = {"type": "ephemeral", "ttl": ttl}
    return marked


def ask(client, model="claude-haiku-4-5", system=None, messages=None, **extra):
    request = {"model": model, "max_tokens": 16,
               "messages": messages or [{"role": "user", "content": "hi"}], **extra}
    if system is not None:
        request["system"] = system
    return client.messages.create(**request).usage


@pytest.fixture
def api(mock_client):
    return mock_client(max_retries=0)


def test_each_model_has_its_documented_minimum():
    assert cache_minimum("claude-haiku-4-5") == 4096
    assert cache_minimum("claude-opus-4-5-20251101") == 4096
    assert cache_minimum("claude-opus-4-6") == 4096
    assert cache_minimum("claude-sonnet-4-5") == 1024
    assert cache_minimum("claude-sonnet-4-6") == 1024          # the docs; not 2,048
    assert cache_minimum("claude-opus-4-7") == 2048
    assert cache_minimum("claude-opus-5-5") == cache_minimum("claude-opus-5") == 512
    assert cache_minimum("claude-3-5-haiku-latest") == 2048


def test_a_prefix_below_the_models_minimum_is_not_cached(api):
    _, client = api
    system = [block(2500, "rules", ttl="5m")]
    haiku = ask(client, system=system)
    assert (haiku.cache_creation_input_tokens, haiku.cache_read_input_tokens) == (0, 0)
    assert haiku.input_tokens >= 2500
    sonnet = ask(client, model="claude-sonnet-4-5", system=system)
    assert sonnet.cache_creation_input_tokens >= 2500
    assert sonnet.cache_creation.ephemeral_5m_input_tokens == sonnet.cache_creation_input_tokens
    assert ask(client, model="claude-sonnet-4-5", system=system).cache_read_input_tokens >= 2500


def test_ttls_expire_from_the_last_use_and_are_reported_apart(api):
    mock, client = api
    system = [block(5000, "long", ttl="1h"), block(5000, "short", ttl="5m")]
    first = ask(client, system=system)
    assert first.cache_creation.ephemeral_1h_input_tokens >= 5000
    assert first.cache_creation.ephemeral_5m_input_tokens >= 5000
    mock.advance(240)
    assert ask(client, system=system).cache_read_input_tokens >= 10000   # a read refreshes the 5m entry
    mock.advance(240)                                                   # 8 minutes after the write
    assert ask(client, system=system).cache_read_input_tokens >= 10000
    mock.advance(301)
    after = ask(client, system=system)                                  # 5m expired, 1h alive
    assert 5000 <= after.cache_read_input_tokens < 10000
    assert after.cache_creation.ephemeral_5m_input_tokens >= 5000
    mock.advance(3601)
    gone = ask(client, system=system)
    assert gone.cache_read_input_tokens == 0
    assert gone.cache_creation.ephemeral_1h_input_tokens >= 5000


def test_changing_tool_choice_keeps_the_system_cache_but_not_the_messages(api):
    _, client = api
    tool = {"name": "read_file", "input_schema": {"type": "object"}}
    system = [block(5000, "sys", ttl="5m")]
    messages = [{"role": "user", "content": [block(5000, "talk", ttl="5m")]}]
    ask(client, system=system, messages=messages, tools=[tool])
    same = ask(client, system=system, messages=messages, tools=[tool])
    assert same.cache_read_input_tokens >= 10000
    changed = ask(client, system=system, messages=messages, tools=[tool], tool_choice={"type": "none"})
    assert 5000 <= changed.cache_read_input_tokens < 10000
    assert changed.cache_creation_input_tokens >= 5000
    other_tools = ask(client, system=system, messages=messages, tools=[{**tool, "description": "new"}])
    assert other_tools.cache_read_input_tokens == 0


def test_a_breakpoint_looks_back_at_most_20_blocks(api):
    _, client = api

    def read_with_breakpoint_at(blocks, i):
        content = [*blocks[:i], {**blocks[i], "cache_control": {"type": "ephemeral"}}, *blocks[i + 1:]]
        return ask(client, model="claude-sonnet-4-5",
                   messages=[{"role": "user", "content": content}]).cache_read_input_tokens
    near = [block(300, f"near{i}") for i in range(30)]
    assert read_with_breakpoint_at(near, 5) == 0        # writes the prefix up to block 5
    assert read_with_breakpoint_at(near, 24) > 0        # block 5 is the 20th block back from 24
    far = [block(300, f"far{i}") for i in range(30)]
    assert read_with_breakpoint_at(far, 4) == 0
    assert read_with_breakpoint_at(far, 24) == 0        # block 4 is the 21st: out of reach


def test_the_stream_is_shaped_like_the_real_one(mock_client):
    from mock_api import reply, stream_events, tool_call
    _, client = mock_client([reply("Let me look.", tool_call("list_files", {"path": "."}))], max_retries=0)
    events = list(client.messages.create(model="claude-sonnet-4-5", max_tokens=64, stream=True,
                                         system=[block(2000, "sys", ttl="5m")],
                                         messages=[{"role": "user", "content": "hi"}]))
    kinds = [e.type for e in events]                  # the SDK drops ping events
    on_the_wire = [name for name, _ in stream_events({"content": [{"type": "text", "text": "a b"}],
                                                      "usage": {"output_tokens": 1}, "stop_reason": "end_turn"})]
    assert on_the_wire[:3] == ["message_start", "content_block_start", "ping"]
    assert kinds[-2:] == ["message_delta", "message_stop"]
    start_usage = events[0].message.usage
    assert start_usage.cache_creation_input_tokens >= 2000 and start_usage.cache_creation is not None
    json_parts = [e.delta.partial_json for e in events
                  if e.type == "content_block_delta" and e.delta.type == "input_json_delta"]
    assert json_parts[0] == "" and "".join(json_parts) == '{"path": "."}'
    final = events[-2].usage
    assert final.cache_creation_input_tokens == start_usage.cache_creation_input_tokens
    assert final.input_tokens == start_usage.input_tokens and final.output_tokens > 1


@pytest.mark.parametrize("status, kind, exc", [
    (402, "billing_error", anthropic.APIStatusError),
    (504, "timeout_error", anthropic.InternalServerError),
    (413, "request_too_large", anthropic.APIStatusError),
])
def test_errors_carry_the_real_type_and_a_request_id(mock_client, status, kind, exc):
    _, client = mock_client([error(status, "mock failure")], max_retries=0)
    with pytest.raises(exc) as caught:
        ask(client)
    assert caught.value.status_code == status
    assert caught.value.body["error"]["type"] == kind
    assert caught.value.body["request_id"] == caught.value.request_id
    assert caught.value.request_id.startswith("req_")


def test_a_429_says_when_to_retry_and_which_limit(mock_client):
    _, client = mock_client([error(429, "rate limited")], max_retries=0)
    with pytest.raises(anthropic.RateLimitError) as caught:
        ask(client)
    headers = caught.value.response.headers
    assert headers["retry-after"] == "1"
    assert headers["anthropic-ratelimit-requests-remaining"] == "0"
    assert "anthropic-ratelimit-input-tokens-reset" in headers


def test_kesi_explains_billing_and_names_the_request_id(ws, mock_client):
    import kesi
    _, client = mock_client([error(402, "Your credit balance is too low"), error(504, "upstream timed out")],
                            max_retries=0)
    billing = kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert "billing problem (402)" in billing and "credit balance" in billing and not billing.ok
    timeout = kesi.run_agent(client, [{"role": "user", "content": "hi"}])
    assert "504" in timeout and "request id req_mock_" in timeout


# --- model rules: as strict as the docs, both ways ------------------------------------------------

def rejected(client, **request) -> str:
    request = {"model": "claude-opus-5-5", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}],
               "timeout": 30, **request}          # an explicit timeout: the SDK lets a large max_tokens through
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.messages.create(**request)
    return f"{caught.value.status_code} {caught.value.message}"


def test_an_unknown_model_is_a_404_as_the_api_answers(api):
    _, client = api
    assert rejected(client, model="claude-opus-9").startswith("404")
    assert "model: claude-opus-9" in rejected(client, model="claude-opus-9")


def test_max_tokens_above_the_models_maximum_is_refused(api):
    _, client = api
    assert "max_tokens: 64001 > 64000" in rejected(client, model="claude-haiku-4-5", max_tokens=64_001)
    assert ask(client, model="claude-haiku-4-5-20251001", max_tokens=64_000, timeout=30) is not None


@pytest.mark.parametrize("model, thinking", [
    ("claude-opus-5-5", {"type": "disabled"}),                            # thinking is always on
    ("claude-opus-4-7", {"type": "enabled", "budget_tokens": 2048}),      # adaptive only
    ("claude-3-5-haiku", {"type": "adaptive"}),                           # no thinking at all
])
def test_thinking_settings_a_model_does_not_take_are_refused(api, model, thinking):
    _, client = api
    assert rejected(client, model=model, max_tokens=4096, thinking=thinking).startswith("400 ")


def test_thinking_settings_a_model_takes_are_accepted(api):
    _, client = api
    assert ask(client, model="claude-opus-5-5", thinking={"type": "adaptive"}) is not None
    assert ask(client, model="claude-sonnet-4-5", max_tokens=4096, thinking={"type": "enabled", "budget_tokens": 2048})


def test_changed_or_forged_thinking_blocks_are_refused(api):
    from mock_api import sign
    _, client = api
    thought = "List the files first."

    def turn(block):
        return [{"role": "user", "content": "go"}, {"role": "assistant", "content": [block, {
            "type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt"}]}]
    tools = [{"name": "list_files", "input_schema": {"type": "object"}}]
    good = {"type": "thinking", "thinking": thought, "signature": sign(thought)}
    assert ask(client, model="claude-opus-5-5", messages=turn(good), tools=tools) is not None
    for bad in ({**good, "thinking": thought + " (edited)"}, {**good, "signature": "forged"}):
        assert "Invalid `signature`" in rejected(client, messages=turn(bad), tools=tools)


def test_only_the_four_image_media_types_are_accepted(api):
    _, client = api
    image = lambda kind: {"role": "user", "content": [{"type": "image", "source": {   # a WebP file's first bytes
        "type": "base64", "media_type": kind, "data": "UklGRgAAAABXRUJQVlA4WA=="}}, {"type": "text", "text": "what?"}]}
    assert ask(client, messages=[image("image/webp")]) is not None
    assert "media_type" in rejected(client, messages=[image("image/bmp")])


def test_search_result_blocks_are_accepted_in_tool_results(api):
    _, client = api
    found = {"type": "search_result", "source": "docs/tax.md", "title": "Tax rules",
             "content": [{"type": "text", "text": "VAT is 20%."}]}
    messages = [{"role": "user", "content": "look it up"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [found]}]}]
    tools = [{"name": "search", "input_schema": {"type": "object"}}]
    assert ask(client, messages=messages, tools=tools) is not None


def test_the_models_api_reports_each_models_limits(api):
    mock, client = api
    info = client.models.retrieve("claude-opus-5-5")
    assert (info.max_input_tokens, info.max_tokens) == (1_000_000, 128_000)
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("claude-opus-9")
    assert mock.model_lookups == ["claude-opus-5-5", "claude-opus-9"]
