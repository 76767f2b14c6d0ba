"""The mock Messages API must refuse what the real API refuses.

Every test here goes through the real anthropic SDK over HTTP, so a request
KeSi could build either passes exactly as it would in production or fails
with the same 400 the real API would send.
"""
import anthropic
import pytest

from mock_api import MockAPI, error, reply, tool_call

USER = {"role": "user", "content": "hi"}
TOOL = {"name": "read_file", "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}},
                         "required": ["file_path"]}}


def use(tool_id="toolu_1", name="read_file"):
    return {"type": "tool_use", "id": tool_id, "name": name, "input": {"file_path": "a.txt"}}


def result(tool_id="toolu_1", content="text"):
    return {"type": "tool_result", "tool_use_id": tool_id, "content": content, "is_error": False}


def text(value):
    return {"type": "text", "text": value}


def asked(*messages):
    """A conversation where the assistant called read_file, then messages follow."""
    return [USER, {"role": "assistant", "content": [text("Reading."), use()]}, *messages]


@pytest.fixture
def api(mock_client):
    """(mock, client) with SDK retries off, so each call is one request."""
    return mock_client(max_retries=0)


def send(client, **overrides):
    request = {"model": "claude-haiku-4-5", "max_tokens": 64, "messages": [USER], **overrides}
    return client.messages.create(**request)


def rejection(client, **overrides) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        send(client, **overrides)
    assert caught.value.status_code == 400
    return caught.value.body["error"]["message"]


# --- requests the API accepts ---------------------------------------------------------

def test_a_valid_request_gets_the_scripted_reply(mock_client):
    mock, client = mock_client(["Hello there."], max_retries=0)
    message = send(client, system="Be brief.", tools=[TOOL])
    assert message.content[0].text == "Hello there."
    assert message.stop_reason == "end_turn"
    assert [r["status"] for r in mock.requests] == [200]


@pytest.mark.parametrize("messages", [
    asked({"role": "user", "content": [result()]}),
    asked({"role": "user", "content": [result(), text("and here is more")]}),
    asked({"role": "user", "content": [result(content=[text("as blocks")])]}),
    asked({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}),
    [USER, {"role": "assistant", "content": [use("a1"), use("a2")]},
     {"role": "user", "content": [result("a2"), result("a1")]}],
    [USER, USER],                                            # merged into one turn, like the API
    [USER, {"role": "assistant", "content": "The answer is"}],  # prefill (Haiku 4.5 allows it)
    [{"role": "assistant", "content": "Hello, how can I help?"}, USER],   # assistant first
])
def test_well_formed_conversations_are_accepted(api, messages):
    _, client = api
    assert send(client, tools=[TOOL], messages=messages).content


@pytest.mark.parametrize("overrides", [
    {"max_tokens": 0},
    {"tools": [{**TOOL, "name": "x" * 128}]},
    {"extra_body": {"output_config": {"effort": "low"}, "cache_control": {"type": "ephemeral"},
                    "container": None, "temperature": 0.5}},
])
def test_what_the_api_accepts_is_accepted(api, overrides):
    _, client = api
    assert send(client, **overrides).stop_reason in ("end_turn", "max_tokens")


def test_a_prefill_is_refused_only_by_the_models_that_refuse_it(api):
    _, client = api
    prefill = [USER, {"role": "assistant", "content": "The answer is"}]
    for model in ("claude-opus-4-6", "claude-sonnet-4-6", "claude-opus-4-7"):
        assert "does not support assistant message prefill" in rejection(client, model=model, messages=prefill)
    for model in ("claude-haiku-4-5", "claude-sonnet-4-5"):
        assert send(client, model=model, messages=prefill).content


def test_tool_use_input_survives_the_stream(mock_client):
    mock, client = mock_client([reply("Looking.", tool_call("read_file", {"file_path": "a b.txt"}, id="call-1"))])
    with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=[USER], tools=[TOOL]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["text", "tool_use"]
    assert final.content[1].input == {"file_path": "a b.txt"} and final.content[1].id == "call-1"
    assert final.stop_reason == "tool_use"
    assert mock.requests[0]["body"]["stream"] is True


# --- requests the API refuses ---------------------------------------------------------

@pytest.mark.parametrize("messages, expected", [
    ([], "at least one message is required"),
    ([{"role": "system", "content": "hi"}], "Input should be 'user' or 'assistant'"),
    ([{"role": "user", "content": ""}], "must have non-empty content"),
    ([{"role": "user", "content": []}], "must have non-empty content"),
    ([{"role": "user", "content": "   "}], "non-whitespace text"),
    ([{"role": "user", "content": [text("")]}], "text content blocks must be non-empty"),
    ([{"role": "user", "content": [text(" \n")]}], "non-whitespace text"),
    ([{"role": "user", "content": "hi", "name": "me"}], "Extra inputs are not permitted"),
    ([{"role": "user", "content": [{"type": "txt", "text": "hi"}]}], "does not match any of the expected tags"),
    ([{"role": "user", "content": [use()]}], "only allowed in `assistant` messages"),
    ([USER, {"role": "assistant", "content": [result()]}], "only allowed in `user` messages"),
    ([USER, {"role": "assistant", "content": "done.  "}], "cannot end with trailing whitespace"),
])
def test_malformed_messages_are_refused(api, messages, expected):
    _, client = api
    assert expected in rejection(client, messages=messages)


@pytest.mark.parametrize("messages, expected", [
    (asked(), "ids were found without `tool_result` blocks immediately after: toolu_1"),
    (asked({"role": "user", "content": "what now?"}), "without `tool_result` blocks"),
    (asked({"role": "user", "content": [text("first"), result()]}), "without `tool_result` blocks"),
    (asked({"role": "user", "content": [result(), result("toolu_9")]}),
     "unexpected `tool_use_id` found in `tool_result` blocks: toolu_9"),
    (asked({"role": "user", "content": [result(), result()]}), "must have a single result"),
    ([USER, {"role": "assistant", "content": [use("a1"), use("a2")]},
      {"role": "user", "content": [result("a1")]}], "immediately after: a2"),
    ([USER, {"role": "assistant", "content": [use("dup"), use("dup")]},
      {"role": "user", "content": [result("dup")]}], "Found duplicate id: dup"),
    ([{"role": "user", "content": [result()]}], "unexpected `tool_use_id` found"),
    (asked({"role": "user", "content": [{**result(), "is_error": "yes"}]}), "valid boolean"),
    ([USER, {"role": "assistant", "content": [{**use(), "id": "bad id!"}]},
      {"role": "user", "content": [result("bad id!")]}], "should match pattern"),
])
def test_broken_tool_pairing_is_refused(api, messages, expected):
    _, client = api
    assert expected in rejection(client, tools=[TOOL], messages=messages)


@pytest.mark.parametrize("tools, expected", [
    ([{**TOOL, "name": "讀檔案"}], "String should match pattern"),
    ([{**TOOL, "name": "x" * 129}], "String should match pattern"),
    ([TOOL, TOOL], "Tool names must be unique"),
    ([{"name": "read_file", "description": "no schema"}], "input_schema: Field required"),
    ([{**TOOL, "input_schema": {"type": "array"}}], "Input should be 'object'"),
    ([{**TOOL, "parameters": {}}], "Extra inputs are not permitted"),
])
def test_bad_tool_definitions_are_refused(api, tools, expected):
    _, client = api
    assert expected in rejection(client, tools=tools)


@pytest.mark.parametrize("overrides, expected", [
    ({"max_tokens": -1}, "greater than or equal to 0"),
    ({"model": ""}, "at least 1 character"),
    ({"system": [text("")]}, "text content blocks must be non-empty"),
    ({"system": [{"type": "image", "source": {"type": "base64"}}]}, "does not match any of the expected tags"),
    ({"tool_choice": {"type": "tool", "name": "grep"}, "tools": [TOOL]}, "Tool 'grep' not found"),
    ({"tool_choice": {"type": "sometimes"}}, "Input should be 'auto', 'any', 'tool' or 'none'"),
    ({"extra_body": {"sampling": "hot"}}, "sampling: Extra inputs are not permitted"),
])
def test_bad_options_are_refused(api, overrides, expected):
    _, client = api
    assert expected in rejection(client, **overrides)


def test_cache_control_is_checked_and_limited_to_four(api):
    _, client = api
    marked = {"type": "text", "text": "part", "cache_control": {"type": "ephemeral"}}
    forever = {**marked, "cache_control": {"type": "forever"}}
    one_day = {**marked, "cache_control": {"type": "ephemeral", "ttl": "1d"}}
    assert "Input should be 'ephemeral'" in rejection(client, messages=[{"role": "user", "content": [forever]}])
    assert "Input should be '5m' or '1h'" in rejection(client, messages=[{"role": "user", "content": [one_day]}])
    four = [{**TOOL, "cache_control": {"type": "ephemeral"}}]
    ok = send(client, tools=four, system=[marked, marked], messages=[{"role": "user", "content": [marked]}])
    assert ok.content
    long_first = {**marked, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    assert send(client, system=[long_first, marked]).content
    assert "ttl '1h' must not come after" in rejection(client, system=[marked, long_first])
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in rejection(
        client, tools=four, system=[marked, marked], messages=[{"role": "user", "content": [marked, marked]}])


def test_missing_auth_or_version_headers_are_refused(api):
    mock, _ = api
    no_auth = anthropic.Anthropic(base_url=mock.url, api_key="k", max_retries=0,
                                  default_headers={"Authorization": anthropic.omit, "X-Api-Key": anthropic.omit})
    with pytest.raises(anthropic.AuthenticationError, match="x-api-key header is required"):
        send(no_auth)
    no_version = anthropic.Anthropic(base_url=mock.url, api_key="k", max_retries=0,
                                     default_headers={"anthropic-version": anthropic.omit})
    with pytest.raises(anthropic.BadRequestError, match="anthropic-version"):
        send(no_version)


def test_an_invalid_streaming_request_fails_before_any_event(api):
    _, client = api
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        with client.messages.stream(model="claude-haiku-4-5", max_tokens=64, tools=[TOOL], messages=asked()) as stream:
            for _ in stream:
                pytest.fail("an event arrived for a refused request")


# --- the log, the script and errors ---------------------------------------------------

def test_refused_requests_are_logged_but_consume_no_script_step(mock_client):
    mock, client = mock_client(["first step"], max_retries=2)
    rejection(client, messages=[])
    assert send(client).content[0].text == "first step"
    assert [(r["n"], r["status"], r["retry_count"]) for r in mock.requests] == [(1, 400, 0), (2, 200, 0)]
    assert "at least one message" in mock.requests[0]["error"]
    assert mock.requests[0]["body"]["messages"] == []


def test_a_400_is_not_retried_but_a_529_is(mock_client):
    mock, client = mock_client([error(529, "Overloaded", headers={"retry-after-ms": "10"}), "recovered"],
                               max_retries=2)
    assert send(client).content[0].text == "recovered"
    assert [(r["status"], r["retry_count"]) for r in mock.requests] == [(529, 0), (200, 1)]


def test_scripted_errors_reach_the_sdk_as_its_own_exceptions(mock_client):
    _, client = mock_client([error(400, "prompt is too long: 250000 tokens > 200000 maximum"),
                             error(401, "invalid x-api-key")], max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="prompt is too long"):
        send(client)
    with pytest.raises(anthropic.AuthenticationError):
        send(client)


def test_validation_can_be_switched_off():
    with MockAPI(["anything goes"], validate=False) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="k", max_retries=0)
        assert send(client, messages=[]).content[0].text == "anything goes"
