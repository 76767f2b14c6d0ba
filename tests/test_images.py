"""Images: read_file and @path send PNG, JPEG, GIF and WebP files as image blocks, within the API's limits.

Through the real SDK over HTTP to the mock, which checks image blocks as the API does (media type, base64,
the bytes' real type, 5 MB, user side only). The test images are built here with the standard library."""
import base64
import io
import struct
import subprocess
import sys
import zlib

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call

KESI = str(checklib.ROOT / "kesi.py")


# --- test images, built by hand ------------------------------------------------------------------

def png(width=3, height=2, padding=0) -> bytes:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + b"\xff\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + (chunk(b"tEXt", b"c\0" + b"x" * padding) if padding else b"")
            + chunk(b"IEND", b""))


def gif(width=5, height=4) -> bytes:
    return b"GIF89a" + struct.pack("<HHBBB", width, height, 0, 0, 0) + b",\0\0\0\0\1\0\1\0\0\2\2D\1\0;"


def jpeg(width=7, height=6) -> bytes:
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\1\1\0\0\1\0\1\0\0"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\1\x11\0"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def webp(kind="VP8X", width=9, height=8) -> bytes:
    if kind == "VP8X":
        body = b"\0\0\0\0" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    elif kind == "VP8L":
        body = b"\x2f" + ((width - 1) | (height - 1) << 14).to_bytes(4, "little")
    else:
        body = b"\0\0\0\x9d\x01\x2a" + struct.pack("<HH", width, height)
    chunk = kind.encode() + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


FORMATS = {"shot.png": (png(), "image/png", "3x2 png"), "photo.jpg": (jpeg(), "image/jpeg", "7x6 jpeg"),
           "photo.JPEG": (jpeg(), "image/jpeg", "7x6 jpeg"), "anim.gif": (gif(), "image/gif", "5x4 gif"),
           "x.webp": (webp(), "image/webp", "9x8 webp"), "lossless.webp": (webp("VP8L"), "image/webp", "9x8 webp"),
           "lossy.webp": (webp("VP8 "), "image/webp", "9x8 webp")}


def images_in(content) -> list[dict]:
    """Image blocks in a message's content, inside tool results too."""
    found = []
    for block in content if isinstance(content, list) else []:
        found += [block] if block["type"] == "image" else images_in(block.get("content"))
    return found


@pytest.fixture(autouse=True)
def quiet(ws, monkeypatch):
    monkeypatch.setattr(kesi, "UI", io.StringIO())


# --- read_file -------------------------------------------------------------------------------------

def test_read_file_of_each_format_sends_an_image_block_the_mock_accepts(ws, mock_client):
    for name, (data, _, _) in FORMATS.items():
        (ws / name).write_bytes(data)
    calls = [tool_call("read_file", {"file_path": name}) for name in FORMATS]
    mock, client = mock_client([reply("Let me look.", *calls), "I see them."])
    history = [{"role": "user", "content": "look at the images"}]
    answer = kesi.run_agent(client, history)
    assert answer.ok and answer.text == "I see them.", answer.text
    assert [r["status"] for r in mock.requests] == [200, 200]
    results = mock.requests[1]["body"]["messages"][-1]["content"]
    for result, (name, (data, media_type, described)) in zip(results, FORMATS.items()):
        assert result["is_error"] is False
        text, image = result["content"]
        assert text == {"type": "text", "text": f"{name} (image {described}, 1 KB)"}
        assert image["source"] == {"type": "base64", "media_type": media_type,
                                   "data": base64.b64encode(data).decode()}
    summary = kesi.UI.getvalue()
    assert "> shot.png (image 3x2 png, 1 KB)" in summary and "iVBOR" not in summary   # never the base64


def test_an_image_too_big_in_bytes_or_pixels_or_not_what_its_name_says_is_a_clear_error(ws):
    (ws / "big.png").write_bytes(png(padding=4_000_000))
    (ws / "wide.png").write_bytes(png(width=8001, height=10))
    (ws / "tall.gif").write_bytes(gif(width=10, height=9000))
    (ws / "notes.png").write_text("just some text\n")
    (ws / "really-a-gif.jpg").write_bytes(gif())
    (ws / "empty.webp").write_bytes(b"")
    output, is_error = kesi.read_file("big.png")
    assert is_error and f"{(ws / 'big.png').stat().st_size:,} bytes" in output
    assert "at most 3,932,160" in output and "5 MB" in output and "smaller copy" in output
    output, is_error = kesi.read_file("wide.png")
    assert is_error and "8001x10 pixels" in output and "over 8000x8000" in output and "scaled down" in output
    output, is_error = kesi.read_file("tall.gif")
    assert is_error and "10x9000 pixels" in output
    for name, what in (("notes.png", "not a valid image"), ("really-a-gif.jpg", "a GIF image"),
                       ("empty.webp", "not a valid image")):
        output, is_error = kesi.read_file(name)
        assert is_error and output.startswith(f"Error: {name} is named as a") and what in output, output
    output, is_error = kesi.read_file(".hidden.png")
    assert is_error and "off-limits" in output or "not found" in output


def test_an_image_is_read_through_the_jail(ws, tmp_path_factory):
    outside = tmp_path_factory.mktemp("outside") / "secret.png"
    outside.write_bytes(png())
    (ws / "link.png").symlink_to(outside)
    for path in ("link.png", str(outside), "../secret.png"):
        output, is_error = kesi.read_file(path)
        assert is_error and isinstance(output, str) and "outside the working directory" in output


def test_an_image_is_counted_by_its_pixels_not_its_base64(ws):
    (ws / "big.png").write_bytes(png(width=100, height=75, padding=300_000))
    blocks, _ = kesi.read_file("big.png")
    history = [{"role": "user", "content": [{"type": "text", "text": "see"}, blocks[1]]}]
    tokens = kesi.estimate_tokens(history, kesi.MAIN_AGENT) - kesi.estimate_tokens([], kesi.MAIN_AGENT)
    assert tokens < 100 * 75 // 750 + 200          # about 10 tokens for the image, not 100,000 for the base64
    assert kesi.image_overcount([{"type": "image", "source": {"data": "!!"}}]) == 2 - 4 * kesi.MAX_IMAGE_TOKENS


def test_a_big_image_is_metered_and_estimated_as_an_image_so_nothing_is_cleared_or_compacted(ws, mock_client):
    (ws / "big.png").write_bytes(png(width=400, height=300, padding=1_000_000))     # 1.3 MB of base64
    mock, client = mock_client([reply("Looking.", tool_call("read_file", {"file_path": "big.png"})), "A plot."])
    history = [{"role": "user", "content": "what is in big.png?"}]
    assert kesi.run_agent(client, history) == "A plot." and mock.requests[-1]["status"] == 200
    assert images_in(mock.requests[-1]["body"]["messages"][-1]["content"])
    assert mock.requests[-1]["usage"]["input_tokens"] < 5000             # the mock charges the image ~1,600
    assert kesi.estimate_tokens(history, kesi.MAIN_AGENT) < 10_000       # not 330,000 for the base64
    assert "context:" not in kesi.UI.getvalue()                          # no clearing, no compaction


def test_a_conversation_with_images_is_compacted(ws, mock_client):
    (ws / "a.png").write_bytes(png())
    mock, client = mock_client(["A red dot.", "SUMMARY: the user showed a red dot."])
    history = []
    kesi.run_turn(client, history, kesi.attach_mentions("what is @a.png?"))
    assert images_in(history[0]["content"]) and kesi.is_user_prompt(history[0])
    assert kesi.compact_history(client, history)
    assert [r["status"] for r in mock.requests] == [200, 200] and "SUMMARY" in history[0]["content"]
    assert images_in(mock.requests[1]["body"]["messages"][0]["content"])     # the summary saw the image


def test_old_image_results_are_cleared_like_other_long_results(ws, monkeypatch):
    (ws / "a.png").write_bytes(png())
    blocks, _ = kesi.read_file("a.png")
    monkeypatch.setattr(kesi, "KEEP_RECENT_RESULTS", 1)
    history = [{"role": "user", "content": "go"}]
    for n in range(2):
        history += [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{n}", "name": "read_file",
                                                       "input": {"file_path": "a.png"}}]},
                    {"role": "user", "content": [kesi.tool_result(f"t{n}", blocks, False)]}]
    cleared, _, _ = kesi.clear_old_tool_results(history)
    assert cleared == 1 and history[2]["content"][0]["content"] == kesi.CLEARED_RESULT
    assert images_in(history[4]["content"])


# --- @path in a prompt ------------------------------------------------------------------------------

def run(cwd, *args, mock, stdin=""):
    return subprocess.run([sys.executable, KESI, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          input=stdin, env=checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off"))


def test_at_image_in_a_headless_prompt_sends_it_and_the_session_resumes_with_it(ws):
    (ws / "shot.png").write_bytes(png())
    with MockAPI(["A red picture."]) as mock:
        done = run(ws, "-p", "what is in @shot.png?", mock=mock, stdin="@property\n@shot.png")   # piped: not mentions
    assert done.returncode == 0 and done.stdout == "A red picture.\n", done.stderr
    assert "(attached shot.png)" in done.stderr and "iVBOR" not in done.stderr and "@property" not in done.stderr
    prompt = mock.requests[0]["body"]["messages"][0]["content"]
    assert prompt[:2] == [{"type": "text", "text": "what is in @shot.png?\n\n@property\n@shot.png"},
                          {"type": "text", "text": "shot.png (image 3x2 png, 1 KB)"}]
    assert [i["source"]["data"] for i in images_in(prompt)] == [base64.b64encode(png()).decode()]
    with MockAPI(["It was red."]) as mock:
        done = run(ws, "-c", "-p", "and its colour?", mock=mock)
    assert done.returncode == 0 and done.stdout == "It was red.\n", done.stderr
    assert "Last prompt: what is in @shot.png?" in done.stderr
    messages = mock.requests[0]["body"]["messages"]
    assert mock.requests[0]["status"] == 200 and images_in(messages[0]["content"]) == images_in(prompt)
    assert kesi.text_of(messages[-1]["content"]) == "and its colour?"


def test_at_image_in_the_repl_on_a_terminal_sends_an_image_block(ws, mock_client, kesi_pty):
    (ws / "diagram.webp").write_bytes(webp())
    mock, _ = mock_client(["A diagram."])
    with kesi_pty(ws, mock, TERM="dumb") as term:
        term.expect("you > ")
        term.type("explain @diagram.webp please\n")
        term.expect("(attached diagram.webp)")
        term.expect("KeSi > A diagram.")
        term.expect("you > ")
        assert term.leave() == 0, term.seen[-2000:]
    assert "UklGR" not in term.seen
    content = mock.requests[0]["body"]["messages"][-1]["content"]
    assert [b.get("text") for b in content[:2]] == ["explain @diagram.webp please",
                                                    "diagram.webp (image 9x8 webp, 1 KB)"]
    assert images_in(content)[0]["source"]["media_type"] == "image/webp"


def test_a_refused_image_prompt_is_removed_whole(ws, mock_client):
    (ws / "a.gif").write_bytes(gif())
    mock, client = mock_client([reply("", stop_reason="refusal"), "ok"])
    history = []
    kesi.run_turn(client, history, kesi.attach_mentions("see @a.gif"))
    assert images_in(mock.requests[0]["body"]["messages"][0]["content"]) and history == []
    assert kesi.run_turn(client, history, "hi") == "ok" and mock.requests[-1]["status"] == 200


# --- the mock refuses what the API refuses --------------------------------------------------------

@pytest.mark.parametrize("source, problem", [
    ({"media_type": "image/bmp", "data": base64.b64encode(b"BM").decode()}, "Input should be 'image/jpeg'"),
    ({"media_type": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"media_type": "image/png", "data": base64.b64encode(gif()).decode()}, "does not match the provided media type"),
    ({"media_type": "image/png", "data": "A" * (5 * 1024 * 1024 + 4)}, "image exceeds 5 MB maximum"),
])
def test_the_mock_refuses_a_bad_image_block_with_400(mock_client, source, problem):
    import anthropic
    mock, client = mock_client(["never"])
    image = {"type": "image", "source": {"type": "base64", **source}}
    with pytest.raises(anthropic.BadRequestError, match=problem):
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10,
                               messages=[{"role": "user", "content": [image, {"type": "text", "text": "hi"}]}])
    assert mock.requests[-1]["status"] == 400


def test_the_mock_refuses_an_image_in_an_assistant_message(mock_client):
    import anthropic
    mock, client = mock_client(["never"])
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(png()).decode()}}
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [image]},
                {"role": "user", "content": "and?"}]
    with pytest.raises(anthropic.BadRequestError, match="only allowed in `user` messages"):
        client.messages.create(model="claude-sonnet-4-5", max_tokens=10, messages=messages)
