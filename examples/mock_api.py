#!/usr/bin/env python3
"""A local, scripted stand-in for the Anthropic Messages API.

KeSi's tests must never reach the real API, yet they should exercise the real
`anthropic` SDK end to end (HTTP, SSE parsing, retries). So this module runs a
small HTTP server on 127.0.0.1 that answers `POST /v1/messages` from a script:

    from mock_api import MockAPI, reply, tool_call, error

    script = [
        reply("Let me read it", tool_call("read_file", {"file_path": "a.txt"})),
        error(529, "Overloaded"),
        reply("Done."),
    ]
    with MockAPI(script) as mock:
        client = anthropic.Anthropic(base_url=mock.url, api_key="test-key")
        ...
        assert len(mock.requests) == 3

Interface
---------
* Script steps: `reply(text, *tool_calls, stop_reason=, usage=, delay=, cut_after=, fault=,
  thinking=, stop_details=)` (thinking: a signed thinking block first),
  `error(status, message, type=, headers=, delay=)` (a header set to None is
  left out, e.g. a 429 without retry-after), a bare string (a text reply),
  or a callable `(body) -> step`. The script may also be one callable
  `(body, n) -> step`; `mode_script(name)` builds the named ones (see MODES).
* `MockAPI(script, validate=True, min_cache_tokens=None, port=0, echo=False, clock=None,
  models=None, models_api=True)`
  - `models`: ids to add to (or change in) MODELS; `models_api=False` answers
    GET /v1/models/{id} with 404, like a compatible server without it;
    `model_lookups` lists the ids asked for there.
  - `requests`: one dict per POST: n, body, headers, retry_count, status,
    error, usage, request_id.
  - `min_cache_tokens`: None follows each model's documented minimum
    (CACHE_MINIMUMS); an int applies to every model.
  - `clock`: a callable returning seconds (default time.monotonic);
    `advance(seconds)` moves the mock's time on, so cache TTLs expire in a
    test without waiting. A subprocess can do the same with
    `POST /mock/advance {"seconds": N}`.
* Stream faults, per reply: `cut_after=N` resets the TCP connection after N
  events; `fault=` one of STREAM_FAULTS:
  - "no-stop": the stream ends cleanly without message_delta and message_stop;
  - "null-content": message_start carries `content: null`;
  - "no-usage": message_delta carries no `usage`;
  - "error-event": an `error` event (overloaded_error) after the first content
    block, on a stream that opened with HTTP 200;
  - "no-event-names": `data:` lines without `event:` lines (some compatible servers).

Faithful to the real API where a client can go wrong
----------------------------------------------------
* Validation: requests the real API refuses get its kind of 400 naming the
  place (roles, empty text, tool_use/tool_result pairing, cache_control, the
  prefill that 4.6+ models refuse, unknown models as 404, max_tokens above the
  model's maximum, thinking types a model does not take, thinking blocks whose
  signature does not match; images: media types outside the four, bytes of
  another type, bad base64, more than 5 MB of it, an image in an assistant
  message); what it
  accepts is accepted (an assistant-first list, max_tokens 0, 128-character
  tool names, newer top-level fields, search_result blocks). Features KeSi
  never sends are not validated in depth.
* Prompt caching: per-model minimum prefix, 5-minute and 1-hour TTLs counted
  from the last use, the `cache_creation` breakdown, at most 4 breakpoints, a
  20-block lookback, and tools / tool_choice changes invalidating what follows.
  Tokens are estimated as 4 characters each.
* SSE shaped like the real stream: ping after the first content_block_start,
  an empty first partial_json, cumulative usage in message_delta.
* Errors shaped like the real API: request_id in the body and a request-id
  header; 402 billing_error, 504 timeout_error; retry-after and
  anthropic-ratelimit-* headers on 429.

Run it directly to point a real KeSi session at it:

    python examples/mock_api.py --mode loop --port 8799

Standard library only.
"""

from __future__ import annotations

import argparse
import binascii
import hashlib
import hmac
import json
import math
import re
import socket
import struct
import sys
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable
from urllib.parse import urlsplit

__all__ = [
    "MockAPI", "reply", "tool_call", "error", "mode_script", "stream_events",
    "Reply", "ToolCall", "Error", "validate_request", "Invalid", "cache_minimum", "model_spec", "sign", "MODELS",
]


# ---------------------------------------------------------------------------
# Script steps
# ---------------------------------------------------------------------------

STREAM_FAULTS = ("no-stop", "null-content", "no-usage", "error-event", "no-event-names")


@dataclass
class ToolCall:
    name: str
    input: dict
    id: str | None = None


@dataclass
class Reply:
    text: str | None = None
    tools: tuple = ()
    stop_reason: str | None = None
    usage: dict | None = None
    delay: float = 0.0
    cut_after: int | None = None
    fault: str | None = None
    thinking: str | None = None        # a signed thinking block before the text
    stop_details: dict | None = None   # e.g. a refusal's {"type": "refusal", "explanation": ...}


@dataclass
class Error:
    status: int
    message: str
    type: str | None = None
    headers: dict | None = None
    delay: float = 0.0


def tool_call(name: str, input: dict | None = None, id: str | None = None) -> ToolCall:
    """One tool_use block of a reply; the id is generated when omitted."""
    return ToolCall(name, dict(input or {}), id)


def reply(text: str | None = None, *tools: ToolCall, stop_reason: str | None = None,
          usage: dict | None = None, delay: float = 0.0,
          cut_after: int | None = None, fault: str | None = None,
          thinking: str | None = None, stop_details: dict | None = None) -> Reply:
    """A normal assistant message: optional text, then tool calls."""
    # `reply(tool_call(...))` is an easy slip; treat it as "no text, one tool".
    if isinstance(text, ToolCall):
        text, tools = None, (text, *tools)
    for call in tools:
        if not isinstance(call, ToolCall):
            raise TypeError(f"reply() tools must be tool_call(...) values, got {call!r}")
    if fault is not None and fault not in STREAM_FAULTS:
        raise ValueError(f"unknown fault {fault!r}; one of {STREAM_FAULTS}")
    return Reply(text, tuple(tools), stop_reason, usage, delay, cut_after, fault, thinking, stop_details)


def error(status: int, message: str, *, type: str | None = None,
          headers: dict | None = None, delay: float = 0.0) -> Error:
    """An HTTP error response shaped like the real API's."""
    return Error(status, message, type, dict(headers or {}), delay)


# The real API's error types by HTTP status.
ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
    429: "rate_limit_error", 500: "api_error", 504: "timeout_error", 529: "overloaded_error",
}


def _error_type(status: int) -> str:
    return ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def _rate_limit_headers(retry_after: str = "1") -> dict:
    """What a real 429 carries: when to retry, and the limits that were hit."""
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 60))
    return {"retry-after": retry_after,
            "anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-input-tokens-limit": "50000",
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": reset}


# ---------------------------------------------------------------------------
# Scripted modes (the CLI, examples/day12/mock.py, tests of endless behaviour)
# ---------------------------------------------------------------------------

ALL_GOOD = "(mock) all good."
MODES = {
    "loop": "always the same tool call (list_files): for MAX_TURNS",
    "fail": "always a tool call that fails: for MAX_TOOL_FAILURES",
    "429": "always 429 without retry-after, to watch the SDK's own backoff (the real API sends one)",
    "429-after": "always 429 with retry-after: RETRY_AFTER seconds",
    "529": "always 529 (overloaded_error)",
    "500-then-ok": "500 for the first FAILURES requests, then a normal answer",
    "400": "400 prompt too long (never retried)",
    "400-retry": "400 with x-should-retry: true once, then a normal answer",
    "error-event": "HTTP 200, then an overloaded_error event in the stream",
    "no-stop": "a stream that ends without message_delta and message_stop",
    "null-content": "message_start with content: null",
    "no-usage": "message_delta without usage",
    "refusal": "stop_reason refusal",
    "ok": "a plain answer",
}


def mode_script(name: str, **opts: Any) -> Callable[[dict, int], Any]:
    """A callable script `(body, n) -> step` implementing a named behaviour."""
    failures = int(opts.get("failures", 2))
    retry_after = str(opts.get("retry_after", 2))
    too_long = "prompt is too long: 250000 tokens > 200000 maximum"
    rate_limited = "Number of request tokens has exceeded your per-minute rate limit (mock)"

    modes: dict[str, Callable[[int], Any]] = {
        "loop": lambda n: reply("Let me look at the directory again.",
                                tool_call("list_files", {})),
        "fail": lambda n: reply(None, tool_call("read_file", {"file_path": "missing-file.txt"})),
        "429": lambda n: error(429, rate_limited, headers={"retry-after": None}),
        "429-after": lambda n: error(429, rate_limited, headers={"retry-after": retry_after}),
        "529": lambda n: error(529, "Overloaded"),
        "500-then-ok": lambda n: (error(500, "Internal server error") if n <= failures
                                  else reply(ALL_GOOD)),
        "400": lambda n: error(400, too_long),
        "400-retry": lambda n: (error(400, "(mock) transient bad request",
                                      headers={"x-should-retry": "true"}) if n == 1
                                else reply(ALL_GOOD)),
        "refusal": lambda n: reply("I can't help with that.", stop_reason="refusal"),
    }
    for fault in STREAM_FAULTS:
        modes[fault] = lambda n, fault=fault: reply("Let me check.", tool_call("list_files", {}),
                                                    fault=fault)
    behaviour = modes.get(name, lambda n: reply(ALL_GOOD))
    return lambda body, n: behaviour(n)


# ---------------------------------------------------------------------------
# Validation: reject what the real API rejects, with messages in its style
# ---------------------------------------------------------------------------

class Invalid(Exception):
    """A request the real API would refuse; str(exc) is the API's message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _check(ok: bool, path: str, message: str) -> None:
    if not ok:
        raise Invalid(f"{path}: {message}" if path else message)


def _no_extra_keys(obj: dict, allowed: set, path: str) -> None:
    for key in obj:
        _check(key in allowed, f"{path}.{key}" if path else key,
               "Extra inputs are not permitted")


# Every top-level field of the SDK's MessageCreateParams; only the ones KeSi
# sends are checked in depth.
TOP_LEVEL_KEYS = {
    "model", "max_tokens", "messages", "system", "tools", "tool_choice", "stream",
    "metadata", "temperature", "top_p", "top_k", "stop_sequences", "thinking",
    "service_tier", "context_management", "cache_control", "container", "output_config",
    "inference_geo", "speed", "diagnostics", "mcp_servers",
}

# Keys each content block may carry. These follow the SDK's *Param types, so
# anything the SDK itself can send (or echo back from a response) passes.
BLOCK_KEYS = {
    "text": {"type", "text", "cache_control", "citations"},
    "image": {"type", "source", "cache_control", "transformations"},
    "document": {"type", "source", "cache_control", "citations", "context", "title"},
    "tool_use": {"type", "id", "name", "input", "cache_control", "caller", "toolset_name"},
    "tool_result": {"type", "tool_use_id", "content", "is_error", "cache_control",
                    "toolset_name"},
    "thinking": {"type", "thinking", "signature"},
    "redacted_thinking": {"type", "data"},
    "search_result": {"type", "source", "title", "content", "cache_control", "citations"},
}
TOOL_RESULT_INNER = ("text", "image", "document", "search_result")
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
# The bytes each media type starts with (WebP: RIFF....WEBP), the most base64
# the API takes per image (5 MB), and what an image costs: about
# width*height/750 tokens, at most about 1,600 (the vision docs); the mock
# charges that most, never the length of the base64.
IMAGE_MAGIC = {"image/jpeg": (0, b"\xff\xd8\xff"), "image/png": (0, b"\x89PNG\r\n\x1a\n"),
               "image/gif": (0, b"GIF8"), "image/webp": (8, b"WEBP")}
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
IMAGE_TOKENS = 1600
ASSISTANT_ONLY = ("tool_use", "thinking", "redacted_thinking")
TOOL_KEYS = {
    "name", "description", "input_schema", "cache_control", "strict",
    "input_examples", "type", "allowed_callers", "defer_loading",
    "eager_input_streaming",
}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,128}$")
TOOL_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
MAX_CACHE_BREAKPOINTS = 4
# Claude 4.6 and later refuse a final assistant message (a prefill).
NO_PREFILL = re.compile(r"^claude-(?:(?:opus|sonnet|haiku)-4-[6-9]|[a-z]+-[5-9])")


def validate_headers(headers: dict) -> None:
    """The real API refuses requests without a key or a version header."""
    if not (headers.get("x-api-key") or headers.get("authorization")):
        raise Invalid("x-api-key header is required", status=401)
    _check(bool(headers.get("anthropic-version")), "anthropic-version", "header is required")


def validate_request(body: Any, models: dict | None = None) -> None:
    """Raise Invalid if the real Messages API would reject this body."""
    _check(isinstance(body, dict), "", "request body must be a JSON object")
    _no_extra_keys(body, TOP_LEVEL_KEYS, "")
    _check_required(body)
    _check_model_limits(body, model_spec(body["model"], models))
    if "stream" in body:
        _check(isinstance(body["stream"], bool), "stream", "Input should be a valid boolean")
    tool_names = _check_tools(body.get("tools"))
    _check_tool_choice(body.get("tool_choice"), tool_names)
    _check_system(body.get("system"))
    messages = body["messages"]
    for i, message in enumerate(messages):
        _check_message(message, i, is_last=(i == len(messages) - 1))
    _check_prefill(body["model"], messages)
    _check_tool_pairing(messages)
    _check_breakpoints(body)


def _check_required(body: dict) -> None:
    for key in ("model", "max_tokens", "messages"):
        _check(key in body, key, "Field required")
    model, max_tokens, messages = body["model"], body["max_tokens"], body["messages"]
    _check(isinstance(model, str), "model", "Input should be a valid string")
    _check(model != "", "model", "String should have at least 1 character")
    _check(isinstance(max_tokens, int) and not isinstance(max_tokens, bool), "max_tokens",
           "Input should be a valid integer")
    _check(max_tokens >= 0, "max_tokens", "Input should be greater than or equal to 0")
    _check(isinstance(messages, list), "messages", "Input should be a valid list")
    _check(len(messages) > 0, "messages", "at least one message is required")


def _check_model_limits(body: dict, spec: tuple | None) -> None:
    """An unknown model is a 404; max_tokens and thinking must be what the model takes."""
    model, max_tokens = body["model"], body["max_tokens"]
    if spec is None:
        raise Invalid(f"model: {model}", status=404)
    _check(max_tokens <= spec[1], "", f"max_tokens: {max_tokens} > {spec[1]}, which is the maximum allowed "
           f"number of output tokens for {model}")
    thinking = body.get("thinking")
    if thinking is None:
        return
    _check(isinstance(thinking, dict), "thinking", "Input should be a valid dictionary")
    kind = thinking.get("type")
    _check(kind in ("adaptive", "enabled", "disabled"), "thinking.type",
           "Input should be 'adaptive', 'enabled' or 'disabled'")
    _check(kind[0] in spec[2], "thinking.type", f"thinking.type '{kind}' is not supported for this model")
    if kind == "enabled":
        budget = thinking.get("budget_tokens")
        _check(isinstance(budget, int) and budget >= 1024, "thinking.enabled.budget_tokens",
               "Input should be greater than or equal to 1024")
        _check(budget < max_tokens, "", "`max_tokens` must be greater than `thinking.budget_tokens`")


def _check_tool_choice(choice: Any, tool_names: set) -> None:
    if choice is None:
        return
    _check(isinstance(choice, dict), "tool_choice", "Input should be a valid dictionary")
    _no_extra_keys(choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice")
    kind = choice.get("type")
    _check(kind in ("auto", "any", "tool", "none"), "tool_choice.type",
           "Input should be 'auto', 'any', 'tool' or 'none'")
    if kind == "tool":
        _check(isinstance(choice.get("name"), str), "tool_choice.tool.name", "Field required")
        _check(choice["name"] in tool_names, "tool_choice",
               f"Tool '{choice['name']}' not found in `tools`")


def _check_tools(tools: Any) -> set:
    """Validate tool definitions; return the set of tool names."""
    if tools is None:
        return set()
    _check(isinstance(tools, list), "tools", "Input should be a valid list")
    names: set = set()
    for i, tool in enumerate(tools):
        name = _check_tool(tool, f"tools.{i}")
        _check(name not in names, "tools", "Tool names must be unique.")
        names.add(name)
    return names


def _check_tool(tool: Any, path: str) -> str:
    _check(isinstance(tool, dict), path, "Input should be a valid dictionary")
    name = tool.get("name")
    _check(isinstance(name, str), f"{path}.name", "Field required")
    if tool.get("type") not in (None, "custom"):
        return name  # A server tool (web_search_..., bash_...): no schema of ours to check.
    _no_extra_keys(tool, TOOL_KEYS, path)
    _check(bool(TOOL_NAME.match(name)), f"{path}.name",
           "String should match pattern '^[a-zA-Z0-9_-]{1,128}$'")
    schema = tool.get("input_schema")
    _check(schema is not None, f"{path}.input_schema", "Field required")
    _check(isinstance(schema, dict), f"{path}.input_schema", "Input should be a valid dictionary")
    _check(schema.get("type") == "object", f"{path}.input_schema.type", "Input should be 'object'")
    if "description" in tool:
        _check(isinstance(tool["description"], str), f"{path}.description",
               "Input should be a valid string")
    _check_cache_control(tool.get("cache_control"), f"{path}.cache_control")
    return name


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return  # A plain string (even "") is accepted as the system prompt.
    _check(isinstance(system, list), "system", "Input should be a valid string or list")
    for k, block in enumerate(system):
        _check_block(block, f"system.{k}", role="system", allowed=("text",))


def _check_cache_control(cc: Any, path: str) -> None:
    if cc is None:
        return  # The SDK types allow an explicit null.
    _check(isinstance(cc, dict), path, "Input should be a valid dictionary")
    _no_extra_keys(cc, {"type", "ttl"}, path)
    _check(cc.get("type") == "ephemeral", f"{path}.type", "Input should be 'ephemeral'")
    if "ttl" in cc:
        _check(cc["ttl"] in ("5m", "1h"), f"{path}.ttl", "Input should be '5m' or '1h'")


def _check_message(message: Any, i: int, is_last: bool) -> None:
    path = f"messages.{i}"
    _check(isinstance(message, dict), path, "Input should be a valid dictionary")
    _no_extra_keys(message, {"role", "content"}, path)
    role = message.get("role")
    _check(role in ("user", "assistant"), f"{path}.role", "Input should be 'user' or 'assistant'")
    _check("content" in message, f"{path}.content", "Field required")
    content = message["content"]
    # The real API lets only a final assistant message (a prefill) be empty.
    may_be_empty = is_last and role == "assistant"
    empty_message = "all messages must have non-empty content except for the optional final assistant message"
    if isinstance(content, str):
        _check(content != "" or may_be_empty, path, empty_message)
        _check(content == "" or content.strip() != "", f"{path}.content",
               "text content blocks must contain non-whitespace text")
        return
    _check(isinstance(content, list), f"{path}.content", "Input should be a valid string or list")
    _check(len(content) > 0 or may_be_empty, path, empty_message)
    for k, block in enumerate(content):
        _check_block(block, f"{path}.content.{k}", role)


def _check_block(block: Any, path: str, role: str, allowed=tuple(BLOCK_KEYS)) -> None:
    _check(isinstance(block, dict), path, "Input should be a valid dictionary")
    kind = block.get("type")
    expected = ", ".join(repr(t) for t in allowed)
    _check(kind in allowed, f"{path}.type",
           f"Input tag {kind!r} found using 'type' does not match any of the expected tags: {expected}")
    _no_extra_keys(block, BLOCK_KEYS[kind], path)
    _check_cache_control(block.get("cache_control"), f"{path}.cache_control")
    if kind in ASSISTANT_ONLY:
        _check(role == "assistant", path, f"`{kind}` blocks are only allowed in `assistant` messages")
    if kind in ("tool_result", "search_result", "image"):
        _check(role == "user", path, f"`{kind}` blocks are only allowed in `user` messages")
    BLOCK_CHECKS.get(kind, lambda b, p: None)(block, path)


def _check_text(block: dict, path: str) -> None:
    text = block.get("text")
    _check(isinstance(text, str), f"{path}.text", "Field required")
    _check(text != "", path, "text content blocks must be non-empty")
    _check(text.strip() != "", path, "text content blocks must contain non-whitespace text")


def _check_tool_use(block: dict, path: str) -> None:
    for key, kind in (("id", str), ("name", str), ("input", dict)):
        _check(isinstance(block.get(key), kind), f"{path}.{key}", "Field required")
    _check(bool(TOOL_ID.match(block["id"])), f"{path}.id",
           "String should match pattern '^[a-zA-Z0-9_-]+$'")
    _check(block["name"] != "", f"{path}.name", "String should have at least 1 character")


def _check_tool_result(block: dict, path: str) -> None:
    _check(isinstance(block.get("tool_use_id"), str), f"{path}.tool_use_id", "Field required")
    if "is_error" in block:
        _check(isinstance(block["is_error"], bool), f"{path}.is_error", "Input should be a valid boolean")
    content = block.get("content")
    if content is None or isinstance(content, str):
        return  # Optional, and an empty string result is allowed.
    _check(isinstance(content, list), f"{path}.content", "Input should be a valid string or list")
    for j, inner in enumerate(content):
        _check_block(inner, f"{path}.content.{j}", "user", allowed=TOOL_RESULT_INNER)


def _check_image(block: dict, path: str) -> None:
    source = block.get("source")
    _check(isinstance(source, dict), f"{path}.source", "Field required")
    if source.get("type") == "base64":
        media_type, data = source.get("media_type"), source.get("data")
        _check(media_type in IMAGE_TYPES, f"{path}.source.base64.media_type",
               "Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'")
        _check(isinstance(data, str), f"{path}.source.base64.data", "Field required")
        _check(len(data) <= MAX_IMAGE_BASE64, f"{path}.source.base64",
               f"image exceeds 5 MB maximum: {len(data)} bytes > {MAX_IMAGE_BASE64} bytes")
        try:
            raw = binascii.a2b_base64(data, strict_mode=True)
        except (binascii.Error, ValueError):
            raise Invalid(f"{path}.source.base64.data: The image data is not valid base64") from None
        at, magic = IMAGE_MAGIC[media_type]
        _check(raw[at:at + len(magic)] == magic, f"{path}.source.base64",
               f"Image does not match the provided media type {media_type}")


def _check_search_result(block: dict, path: str) -> None:
    for key in ("source", "title"):
        _check(isinstance(block.get(key), str), f"{path}.{key}", "Field required")
    content = block.get("content")
    _check(isinstance(content, list), f"{path}.content", "Input should be a valid list")
    for j, inner in enumerate(content):
        _check_block(inner, f"{path}.content.{j}", "user", allowed=("text",))


# Thinking blocks come back exactly as the API sent them: it signs them, and
# refuses a block whose thinking or signature was changed (or made up).
SIGNING_KEY = b"kesi-mock-signing-key"


def sign(text: str) -> str:
    return hmac.new(SIGNING_KEY, text.encode(), hashlib.sha256).hexdigest()


def _check_thinking(block: dict, path: str) -> None:
    _check(isinstance(block.get("thinking"), str), f"{path}.thinking", "Field required")
    _check(block.get("signature") == sign(block["thinking"]), path, "Invalid `signature` in `thinking` block")


def _check_redacted(block: dict, path: str) -> None:
    payload, _, signature = str(block.get("data")).rpartition(".")
    _check(signature == sign(payload), path, "Invalid `data` in `redacted_thinking` block")


BLOCK_CHECKS = {"text": _check_text, "tool_use": _check_tool_use, "tool_result": _check_tool_result,
                "image": _check_image, "search_result": _check_search_result, "thinking": _check_thinking,
                "redacted_thinking": _check_redacted}


def _blocks_of(message: dict) -> list:
    """Content as a list of blocks; a string is one text block."""
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _check_prefill(model: str, messages: list) -> None:
    last = messages[-1]
    if last["role"] != "assistant":
        return
    _check(not NO_PREFILL.match(model), "",
           "This model does not support assistant message prefill. "
           "The conversation must end with a user message.")
    blocks = _blocks_of(last)
    if blocks and blocks[-1].get("type") == "text":
        _check(blocks[-1]["text"] == blocks[-1]["text"].rstrip(), "messages",
               "final assistant content cannot end with trailing whitespace")


def _turns(messages: list) -> list:
    """Merge runs of same-role messages into turns, like the real API does.

    Each turn is (role, [(message_index, block_index, block), ...]) so errors
    can still name the original positions.
    """
    turns: list = []
    for i, message in enumerate(messages):
        located = [(i, k, b) for k, b in enumerate(_blocks_of(message))]
        if turns and turns[-1][0] == message["role"]:
            turns[-1][1].extend(located)
        else:
            turns.append((message["role"], located))
    return turns


def _check_tool_pairing(messages: list) -> None:
    """Every tool_use must be answered at the start of the very next turn."""
    turns = _turns(messages)
    seen_ids: set = set()
    for t, (role, blocks) in enumerate(turns):
        if role == "assistant":
            _check_tool_uses_answered(blocks, turns[t + 1][1] if t + 1 < len(turns) else [], seen_ids)
        else:
            previous = turns[t - 1][1] if t > 0 else []
            _check_results_expected(blocks, previous)


def _check_tool_uses_answered(blocks: list, next_blocks: list, seen_ids: set) -> None:
    uses = [(i, k, b) for i, k, b in blocks if b.get("type") == "tool_use"]
    for i, k, block in uses:
        _check(block["id"] not in seen_ids, f"messages.{i}.content.{k}",
               f"`tool_use` ids must be unique. Found duplicate id: {block['id']}")
        seen_ids.add(block["id"])
    answered = set()
    for _, _, block in next_blocks:
        if block.get("type") != "tool_result":
            break  # Results must come before anything else in the turn.
        answered.add(block["tool_use_id"])
    missing = [(i, b["id"]) for i, _, b in uses if b["id"] not in answered]
    if missing:
        ids = ", ".join(tool_id for _, tool_id in missing)
        raise Invalid(
            f"messages.{missing[0][0]}: `tool_use` ids were found without `tool_result` blocks "
            f"immediately after: {ids}. Each `tool_use` block must have a corresponding "
            f"`tool_result` block in the next message.")


def _check_results_expected(blocks: list, previous_blocks: list) -> None:
    expected = {b["id"] for _, _, b in previous_blocks if b.get("type") == "tool_use"}
    answered: set = set()
    for i, k, block in blocks:
        if block.get("type") != "tool_result":
            continue
        tool_id = block["tool_use_id"]
        _check(tool_id in expected, f"messages.{i}.content.{k}",
               f"unexpected `tool_use_id` found in `tool_result` blocks: {tool_id}. Each "
               f"`tool_result` block must have a corresponding `tool_use` block in the previous message.")
        _check(tool_id not in answered, f"messages.{i}.content.{k}",
               "each `tool_use` must have a single result. "
               f"Found multiple `tool_result` blocks with id: {tool_id}")
        answered.add(tool_id)


def _check_breakpoints(body: dict) -> None:
    """At most four breakpoints, and a 1-hour one never after a 5-minute one."""
    ttls = [ttl for _, ttl in _cache_units(body) if ttl]
    _check(len(ttls) <= MAX_CACHE_BREAKPOINTS, "",
           f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
           f"Found {len(ttls)}.")
    _check("1h" not in ttls or "5m" not in ttls or ttls.index("5m") > _last(ttls, "1h"), "",
           "a cache_control block with ttl '1h' must not come after one with ttl '5m'")


def _last(items: list, value: Any) -> int:
    return len(items) - 1 - items[::-1].index(value)


# ---------------------------------------------------------------------------
# Prompt caching, by the documented rules
# ---------------------------------------------------------------------------

CACHE_LOOKBACK = 20      # a breakpoint finds an earlier cache entry at most this many blocks back
TTL_SECONDS = {"5m": 300, "1h": 3600}
# The models the API knows: context window and largest max_tokens (models overview and each model's
# page, https://platform.claude.com/docs/en/about-claude/models/overview), the thinking types each takes
# (a: adaptive, e: enabled with budget_tokens, d: disabled), and the shortest prefix it caches
# (https://platform.claude.com/docs/en/build-with-claude/prompt-caching; a shorter one is simply not
# cached, with no error). Fable and Mythos 5.1 and 5.2: the docs give no minimum, so the smallest.
MODELS = {
    **dict.fromkeys(("claude-fable-5-2", "claude-mythos-5-2", "claude-fable-5-1", "claude-mythos-5-1",
                     "claude-fable-5", "claude-mythos-5", "claude-opus-5-5"), (1_000_000, 128_000, "a", 512)),
    **dict.fromkeys(("claude-sonnet-5-5", "claude-haiku-5-5", "claude-opus-5"), (1_000_000, 128_000, "ad", 512)),
    "claude-sonnet-5": (1_000_000, 128_000, "ad", 1024), "claude-opus-4-8": (1_000_000, 128_000, "ad", 1024),
    "claude-opus-4-7": (1_000_000, 128_000, "ad", 2048), "claude-opus-4-6": (1_000_000, 128_000, "aed", 4096),
    "claude-sonnet-4-6": (1_000_000, 64_000, "aed", 1024),
    "claude-opus-4-5": (200_000, 64_000, "ed", 4096), "claude-haiku-4-5": (200_000, 64_000, "ed", 4096),
    **dict.fromkeys(("claude-sonnet-4-5", "claude-sonnet-4", "claude-sonnet-4-0", "claude-3-7-sonnet"),
                    (200_000, 64_000, "ed", 1024)),
    **dict.fromkeys(("claude-opus-4-1", "claude-opus-4", "claude-opus-4-0"), (200_000, 32_000, "ed", 1024)),
    "claude-3-5-sonnet": (200_000, 8192, "d", 1024), "claude-3-opus": (200_000, 4096, "d", 1024),
    "claude-3-5-haiku": (200_000, 8192, "d", 2048), "claude-3-haiku": (200_000, 4096, "d", 2048),
}
DEFAULT_CACHE_MINIMUM = 512     # for unknown models when validation is off


def model_spec(model: str, models: dict | None = None) -> tuple | None:
    """(context window, max output, thinking types, cache minimum), for an id with or without its date."""
    return (models or MODELS).get(re.sub(r"(-\d{8}|-latest)$", "", str(model)))


def cache_minimum(model: str) -> int:
    spec = model_spec(model)
    return spec[3] if spec else DEFAULT_CACHE_MINIMUM


def estimate_tokens(text: str) -> int:
    """Roughly 4 characters per token, like the usual rule of thumb."""
    return math.ceil(len(text) / 4)


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dicts(value: Any) -> list:
    """The dict items of a list; tolerant of junk so validate=False never crashes."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _ttl(block: dict) -> str | None:
    """The breakpoint's TTL if this block carries one (inside a tool_result too)."""
    for candidate in [block, *(_dicts(block.get("content")) if block.get("type") == "tool_result" else [])]:
        cc = candidate.get("cache_control")
        if isinstance(cc, dict):
            return cc.get("ttl", "5m")
    return None


def _strip_cache_control(block: dict) -> dict:
    """A block as the cache sees it: cache_control markers do not change the prefix."""
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    if clean.get("type") == "image" and isinstance(clean.get("source"), dict):   # its cost, not its base64
        digest = hashlib.sha256(str(clean["source"].get("data")).encode()).hexdigest()
        clean["source"] = {**clean["source"], "data": digest.ljust(4 * IMAGE_TOKENS, ".")}
    if clean.get("type") == "tool_result" and isinstance(clean.get("content"), list):
        clean["content"] = [_strip_cache_control(b) if isinstance(b, dict) else b
                            for b in clean["content"]]
    return clean


def _cache_units(body: dict) -> list:
    """The prompt in cache order (tools, system, messages) as (text, ttl or None).

    tool_choice is folded into the first message unit: changing it keeps the
    tools and system cache but invalidates every message breakpoint, as the
    documentation says. A top-level cache_control marks the last block.
    """
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}] if system else []
    placed = [("tool", tool) for tool in _dicts(body.get("tools"))]
    placed += [("system", block) for block in _dicts(system)]
    for message in _dicts(body.get("messages")):
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        placed += [(str(message.get("role")), block) for block in _dicts(content)]
    units = [(_canonical({where: _strip_cache_control(block)}), _ttl(block)) for where, block in placed]
    first_message = len(_dicts(body.get("tools"))) + len(_dicts(system))
    if first_message < len(units):
        text, ttl = units[first_message]
        units[first_message] = (_canonical(body.get("tool_choice")) + text, ttl)
    automatic = body.get("cache_control")
    if isinstance(automatic, dict) and units and units[-1][1] is None:
        units[-1] = (units[-1][0], automatic.get("ttl", "5m"))
    return units


class PromptCache:
    """Server-wide cache entries: prefix hash -> (expiry time, ttl)."""

    def __init__(self, min_tokens: int | None, now: Callable[[], float]):
        self.min_tokens = min_tokens
        self.now = now
        self._entries: dict = {}
        self._lock = threading.Lock()

    def usage(self, body: Any) -> dict:
        """Input-side usage for this request; writes and refreshes its entries."""
        if not isinstance(body, dict):
            body = {}  # Junk sent with validate=False: nothing to cache.
        model = str(body.get("model"))
        minimum = self.min_tokens if self.min_tokens is not None else cache_minimum(model)
        units = _cache_units(body)
        hashes, totals = _prefixes(units, seed=model)
        marks = [i for i, (_, ttl) in enumerate(units) if ttl and totals[i] >= minimum]
        total = totals[-1] if totals else 0
        with self._lock:
            now = self.now()
            read = self._read(marks, hashes, totals, now)
            written = {"5m": 0, "1h": 0}
            done = read
            for i in marks:
                ttl = units[i][1]
                written[ttl] += max(0, totals[i] - done)
                done = max(done, totals[i])
                self._entries[hashes[i]] = (now + TTL_SECONDS[ttl], ttl)
        creation = written["5m"] + written["1h"]
        return {"input_tokens": total - read - creation,
                "cache_creation_input_tokens": creation,
                "cache_read_input_tokens": read,
                "cache_creation": {"ephemeral_5m_input_tokens": written["5m"],
                                   "ephemeral_1h_input_tokens": written["1h"]}}

    def _read(self, marks: list, hashes: list, totals: list, now: float) -> int:
        """Tokens of the longest live entry within the lookback of a breakpoint.
        A hit refreshes the entry: TTLs count from the last use."""
        best, hit = 0, None
        for b in marks:
            for j in range(b, max(b - CACHE_LOOKBACK + 1, 0) - 1, -1):
                entry = self._entries.get(hashes[j])
                if entry and entry[0] > now:
                    if totals[j] > best:
                        best, hit = totals[j], j
                    break
        if hit is not None:
            ttl = self._entries[hashes[hit]][1]
            self._entries[hashes[hit]] = (now + TTL_SECONDS[ttl], ttl)
        return best


def _prefixes(units: list, seed: str) -> tuple[list, list]:
    """Hash and cumulative token count of every prefix units[0..i]."""
    # Seeding with the model mirrors the real cache being per model.
    running = hashlib.sha256(seed.encode())
    hashes, totals, tokens = [], [], 0
    for text, _ in units:
        running.update(text.encode() + b"\x1e")
        hashes.append(running.hexdigest())
        tokens += estimate_tokens(text)
        totals.append(tokens)
    return hashes, totals


# ---------------------------------------------------------------------------
# The stream, event by event as the real API sends it
# ---------------------------------------------------------------------------

def _split_text(text: str) -> list:
    """Chunks for text_delta events: by word, or halves for a single word."""
    pieces = re.findall(r"\s*\S+\s*", text) or [text]
    if len(pieces) < 2 and len(text) >= 2:
        pieces = [text[:len(text) // 2], text[len(text) // 2:]]
    return pieces


def _block_events(index: int, block: dict) -> list:
    if block["type"] == "text":
        start = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": t} for t in _split_text(block["text"])]
    elif block["type"] == "thinking":
        start = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": t} for t in _split_text(block["thinking"])]
        deltas.append({"type": "signature_delta", "signature": block["signature"]})
    else:
        # The real API opens with an empty fragment, then sends the JSON in pieces.
        raw = json.dumps(block["input"])
        size = max(1, math.ceil(len(raw) / 3))
        start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [{"type": "input_json_delta", "partial_json": p}
                  for p in ["", *(raw[i:i + size] for i in range(0, len(raw), size))]]
    events = [("content_block_start", {"type": "content_block_start", "index": index,
                                       "content_block": start})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": index,
                                        "delta": d}) for d in deltas]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def stream_events(message: dict, fault: str | None = None) -> list:
    """The SSE events the real API would send for this complete message,
    with one of STREAM_FAULTS if asked."""
    usage = message["usage"]
    opening = {**message, "content": None if fault == "null-content" else [],
               "stop_reason": None, "stop_sequence": None, "usage": {**usage, "output_tokens": 1}}
    events = [("message_start", {"type": "message_start", "message": opening})]
    for index, block in enumerate(message["content"]):
        events += _block_events(index, block)
        if index == 0:
            events.insert(2, ("ping", {"type": "ping"}))
        if index == 0 and fault == "error-event":
            return events + [("error", {"type": "error", "error": {
                "type": "overloaded_error", "message": "Overloaded"}})]
    if not message["content"]:
        events.append(("ping", {"type": "ping"}))
    if fault == "no-stop":
        return events
    delta = {"type": "message_delta",
             "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None,
                       **({"stop_details": message["stop_details"]} if message.get("stop_details") else {})},
             "usage": {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                             "cache_read_input_tokens", "output_tokens") if k in usage}}
    if fault == "no-usage":
        del delta["usage"]
    events.append(("message_delta", delta))
    events.append(("message_stop", {"type": "message_stop"}))
    return [(None, data) for _, data in events] if fault == "no-event-names" else events


def _error_body(step: Error, request_id: str) -> dict:
    return {"type": "error", "request_id": request_id,
            "error": {"type": step.type or _error_type(step.status), "message": step.message}}


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Idle keep-alive connections would otherwise make server_close() hang.
    block_on_close = False


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 so the SDK can keep connections alive and streams can be chunked.
    protocol_version = "HTTP/1.1"
    server_version = "KeSiMockAPI/1.0"

    def setup(self) -> None:
        super().setup()
        self.server.mock._track(self.connection, add=True)

    def finish(self) -> None:
        self.server.mock._track(self.connection, add=False)
        try:
            super().finish()
        except OSError:
            pass  # The client (or cut_after) already tore the connection down.

    def log_message(self, format: str, *args: Any) -> None:
        pass  # Tests want quiet output; the CLI prints its own one-line summary.

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/":
            self.server.mock._send(self, 200, b"ok", {"Content-Type": "text/plain"})
        elif path.startswith("/v1/models/"):
            self.server.mock._model_info(self, path.removeprefix("/v1/models/"))
        else:
            self.server.mock._send_error(self, error(404, f"Not found: {self.path}"), "req_mock_get")

    def do_POST(self) -> None:
        try:
            self.server.mock._handle_post(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # The client hung up (Ctrl-C, timeout); nothing to do.


class MockAPI:
    """A scripted Messages API on 127.0.0.1; see the module docstring."""

    def __init__(self, script: list | Callable | None = None, *, validate: bool = True,
                 min_cache_tokens: int | None = None, port: int = 0, echo: bool = False,
                 clock: Callable[[], float] | None = None, models: dict | None = None,
                 models_api: bool = True):
        self.script = script
        self.validate = validate
        self.models = {**MODELS, **(models or {})}    # what this server knows, and reports on GET /v1/models/{id}
        self.models_api = models_api                  # False: a compatible server without the Models API
        self.model_lookups: list[str] = []
        self.port = port
        self.echo = echo  # Print one line per POST (used by the CLI).
        self.requests: list[dict] = []
        self._steps = None if callable(script) else deque(script or [])
        self._clock = clock or time.monotonic
        self._skipped = 0.0
        self._cache = PromptCache(min_cache_tokens, self.now)
        self._lock = threading.Lock()
        self._tool_ids = 0
        self._server: _Server | None = None
        self._connections: set = set()
        self._stopped = False

    mode = staticmethod(mode_script)

    def now(self) -> float:
        return self._clock() + self._skipped

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the cache (an idle gap without the wait)."""
        self._skipped += seconds

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "MockAPI":
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.mock = self
        self.port = self._server.server_address[1]
        thread = threading.Thread(target=self._server.serve_forever,
                                  kwargs={"poll_interval": 0.01}, daemon=True)
        thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        # Wake handler threads parked on idle keep-alive connections.
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._server = None

    def __enter__(self) -> "MockAPI":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("MockAPI is not running; call start() first")
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        """Environment variables that point a subprocess (e.g. kesi.py) here."""
        return {"ANTHROPIC_BASE_URL": self.url, "ANTHROPIC_API_KEY": "test-key"}

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._connections.add if add else self._connections.discard)(conn)

    # -- one request -------------------------------------------------------

    def _handle_post(self, h: _Handler) -> None:
        raw = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        if self._stopped:  # A kept-alive connection outliving stop(): just hang up.
            h.close_connection = True
            return
        if urlsplit(h.path).path == "/mock/advance":
            self.advance(float(json.loads(raw or b"{}").get("seconds", 0)))
            self._send(h, 200, b"{}", {"Content-Type": "application/json"})
            return
        entry = self._log(h, raw)
        body, problem = self._parse_and_validate(h, raw, entry)
        if problem is not None:
            self._finish_entry(entry, problem.status, None, problem.message)
            self._send_error(h, problem, entry["request_id"])
            return
        step = self._next_step(body, entry["n"])
        if isinstance(step, Error):
            self._finish_entry(entry, step.status, None, None)
            time.sleep(step.delay)
            self._send_error(h, step, entry["request_id"])
        else:
            self._answer(h, step, body, entry)

    def _model_info(self, h: _Handler, model: str) -> None:
        """GET /v1/models/{id}: the fields of the Models API that KeSi reads."""
        self.model_lookups.append(model)
        headers = {k.lower(): v for k, v in h.headers.items()}
        spec = model_spec(model, self.models)
        if not self.models_api:
            self._send_error(h, error(404, f"Not found: {h.path}"), "req_mock_models")
        elif not (headers.get("x-api-key") or headers.get("authorization")):
            self._send_error(h, error(401, "x-api-key header is required"), "req_mock_models")
        elif spec is None:
            self._send_error(h, error(404, f"model: {model}"), "req_mock_models")
        else:
            info = {"type": "model", "id": model, "display_name": model, "created_at": "2026-01-01T00:00:00Z",
                    "lifecycle": "active", "max_input_tokens": spec[0], "max_tokens": spec[1]}
            self._send(h, 200, json.dumps(info).encode(), {"Content-Type": "application/json"})

    def _log(self, h: _Handler, raw: bytes) -> dict:
        headers = {k.lower(): v for k, v in h.headers.items()}
        with self._lock:
            n = len(self.requests) + 1
            entry = {"n": n, "body": None, "headers": headers,
                     "retry_count": _int_or_zero(headers.get("x-stainless-retry-count")),
                     "time": time.monotonic(), "bytes": len(raw), "status": None,
                     "error": None, "usage": None, "request_id": f"req_mock_{n:04d}"}
            self.requests.append(entry)
        return entry

    def _parse_and_validate(self, h: _Handler, raw: bytes, entry: dict):
        """(body, None) if acceptable, else (body, Error step to send)."""
        if urlsplit(h.path).path != "/v1/messages":
            return None, error(404, f"Not found: {h.path}")
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            return None, error(400, f"There was an error parsing the body: {exc}")
        entry["body"] = body
        if not self.validate:
            return body, None
        try:
            validate_headers(entry["headers"])
            validate_request(body, self.models)
        except Invalid as exc:
            return body, error(exc.status, str(exc))
        return body, None

    def _next_step(self, body: Any, n: int) -> Reply | Error:
        """Consume the next script step (only for requests that passed validation)."""
        try:
            if self._steps is None:
                step = self.script(body, n)
            else:
                with self._lock:
                    step = self._steps.popleft() if self._steps else reply("(mock) done.")
            return _resolve(step, body)
        except Exception as exc:  # A broken test script: make it loud, and stop SDK retries.
            traceback.print_exc()
            return error(500, f"mock script error: {exc!r}", headers={"x-should-retry": "false"})

    def _answer(self, h: _Handler, step: Reply, body: Any, entry: dict) -> None:
        message = self._build_message(step, body, entry["n"])
        self._finish_entry(entry, 200, message["usage"], None)
        time.sleep(step.delay)
        extra = {"request-id": entry["request_id"]}
        if isinstance(body, dict) and body.get("stream") is True:
            self._send_stream(h, stream_events(message, step.fault), step.cut_after, extra)
        else:
            payload = json.dumps(message).encode()
            self._send(h, 200, payload, {"Content-Type": "application/json", **extra})

    def _finish_entry(self, entry: dict, status: int, usage: dict | None, problem: str | None) -> None:
        # Filled in before the response goes out, so a test that has its
        # answer can already read the full log entry.
        entry.update(status=status, usage=usage, error=problem)
        if self.echo:
            self._echo(entry)

    def _echo(self, entry: dict) -> None:
        with self._lock:
            previous = self.requests[entry["n"] - 2] if entry["n"] > 1 else None
        since = f", {entry['time'] - previous['time']:.2f} s since previous" if previous else ""
        note = f" {entry['error']}" if entry["error"] else ""
        print(f"request {entry['n']} (retry-count={entry['retry_count']}, "
              f"body {entry['bytes']} bytes{since}) -> {entry['status']}{note}", flush=True)

    def _build_message(self, step: Reply, body: Any, n: int) -> dict:
        content = []
        if step.thinking:
            content.append({"type": "thinking", "thinking": step.thinking, "signature": sign(step.thinking)})
        if step.text:
            content.append({"type": "text", "text": step.text})
        for call in step.tools:
            content.append({"type": "tool_use", "id": call.id or self._new_tool_id(),
                            "name": call.name, "input": call.input})
        stop_reason = step.stop_reason or ("tool_use" if step.tools else "end_turn")
        if isinstance(body, dict) and body.get("max_tokens") == 0:
            content, stop_reason = [], "max_tokens"
        usage = self._cache.usage(body)
        usage["output_tokens"] = max(1, estimate_tokens(_canonical(content)))
        usage["service_tier"] = "standard"
        usage.update(step.usage or {})
        model = body.get("model") if isinstance(body, dict) else None
        return {"id": f"msg_mock_{n}", "type": "message", "role": "assistant",
                "model": model or "mock-model", "content": content, "stop_reason": stop_reason,
                "stop_sequence": None, "usage": usage,
                **({"stop_details": step.stop_details} if step.stop_details else {})}

    def _new_tool_id(self) -> str:
        with self._lock:
            self._tool_ids += 1
            return f"toolu_mock_{self._tool_ids}"

    # -- writing -----------------------------------------------------------

    def _send(self, h: _Handler, status: int, payload: bytes, headers: dict) -> None:
        h.send_response(status)
        for name, value in headers.items():
            h.send_header(name, str(value))
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)

    def _send_error(self, h: _Handler, step: Error, request_id: str) -> None:
        payload = json.dumps(_error_body(step, request_id)).encode()
        headers = {"Content-Type": "application/json", "request-id": request_id,
                   **(_rate_limit_headers() if step.status == 429 else {}), **(step.headers or {})}
        self._send(h, step.status, payload, {k: v for k, v in headers.items() if v is not None})

    def _send_stream(self, h: _Handler, events: list, cut_after: int | None, headers: dict) -> None:
        # Chunked, like the real API: a cut then shows up as an incomplete body,
        # not as a normal end of stream.
        h.send_response(200)
        for name, value in {"Content-Type": "text/event-stream; charset=utf-8",
                            "Cache-Control": "no-cache", "Transfer-Encoding": "chunked",
                            "Connection": "close", **headers}.items():
            h.send_header(name, value)
        h.end_headers()
        h.close_connection = True
        for count, (name, data) in enumerate(events):
            if cut_after is not None and count >= cut_after:
                _reset_connection(h)
                return
            chunk = (f"event: {name}\n" * (name is not None) + f"data: {json.dumps(data)}\n\n").encode()
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")


def _resolve(step: Any, body: Any) -> Reply | Error:
    """Turn a script entry into a concrete step (callables get the body)."""
    while not isinstance(step, (Reply, Error)):
        if isinstance(step, str):
            step = reply(step)  # Convenience: a bare string is a text reply.
        elif callable(step):
            step = step(body)
        else:
            raise TypeError(f"not a script step: {step!r}")
    return step


def _reset_connection(h: _Handler) -> None:
    """Drop the connection with a TCP RST, like a network failure mid-stream."""
    time.sleep(0.05)  # Let the client read what was sent before the reset.
    try:
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.rfile.close()  # Drop the makefile() reference so close() is real.
        h.connection.close()
    except OSError:
        pass


def _int_or_zero(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------

def serve(mock: MockAPI, mode: str) -> int:
    """Run until Ctrl-C, printing one line per request."""
    mock.start()
    print(f"mock Anthropic API (mode {mode}) on {mock.url} - Ctrl-C to stop", flush=True)
    print(f"  export ANTHROPIC_BASE_URL={mock.url} ANTHROPIC_API_KEY=test-key", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("\nstopped", file=sys.stderr)
    finally:
        mock.stop()
    return 0


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a scripted mock of the Anthropic Messages API.")
    parser.add_argument("--mode", default="ok", help="; ".join(f"{k}: {v}" for k, v in MODES.items()))
    parser.add_argument("--port", type=int, default=8799)
    parser.add_argument("--retry-after", default="2", help="seconds, for --mode 429-after")
    parser.add_argument("--failures", type=int, default=2, help="for --mode 500-then-ok")
    parser.add_argument("--min-cache-tokens", type=int, default=None,
                        help="one minimum for every model (default: each model's own)")
    parser.add_argument("--no-validate", action="store_true", help="accept any request body")
    args = parser.parse_args(argv)
    script = mode_script(args.mode, retry_after=args.retry_after, failures=args.failures)
    mock = MockAPI(script, validate=not args.no_validate, port=args.port,
                   min_cache_tokens=args.min_cache_tokens, echo=True)
    return serve(mock, args.mode)


if __name__ == "__main__":
    sys.exit(main())
