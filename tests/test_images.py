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
    """A grey baseline JPEG a decoder reads: each 8x8 block is a 1-bit DC code and a 1-bit end of block."""
    def segment(marker, body):
        return b"\xff" + marker + struct.pack(">H", len(body) + 2) + body
    one_code = b"\1" + b"\0" * 15 + b"\0"        # a Huffman table of one 1-bit code, for symbol 0
    bits = "00" * (-(-width // 8) * -(-height // 8))
    scan = int(bits.ljust(-(-len(bits) // 8) * 8, "1"), 2).to_bytes(-(-len(bits) // 8), "big")
    return (b"\xff\xd8" + segment(b"\xe0", b"JFIF\0\1\1\0\0\1\0\1\0\0") + segment(b"\xdb", b"\0" + b"\1" * 64)
            + segment(b"\xc0", struct.pack(">BHHB", 8, height, width, 1) + b"\1\x11\0")
            + segment(b"\xc4", b"\x00" + one_code) + segment(b"\xc4", b"\x10" + one_code)
            + segment(b"\xda", b"\1\1\0\0\x3f\0") + scan.replace(b"\xff", b"\xff\0") + b"\xff\xd9")


# A 9x8 red picture as libwebp (through Pillow) writes it, lossless and lossy.
WEBP_BODIES = {"VP8L": bytes.fromhex("2f08c001000710fd8ffe0722a2ff01"),
               "VP8 ": bytes.fromhex("9001009d012a0900080002c04c25a00274ba00039800feee431fee6c738b7057ff6d0fff5a1ffeb4"
                                     "3fe94000")}


def webp_chunk(kind: str, body: bytes) -> bytes:
    return kind.encode() + struct.pack("<I", len(body)) + body + b"\0" * (len(body) % 2)


def webp(kind="VP8X") -> bytes:
    """9x8: VP8X is the extended form, its canvas size, then the lossless image."""
    chunks = webp_chunk(kind, WEBP_BODIES[kind]) if kind != "VP8X" else (
        webp_chunk("VP8X", b"\0\0\0\0" + (8).to_bytes(3, "little") + (7).to_bytes(3, "little"))
        + webp_chunk("VP8L", WEBP_BODIES["VP8L"]))
    return b"RIFF" + struct.pack("<I", 4 + len(chunks)) + b"WEBP" + chunks


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


# --- rt24 18, 45, 46: a valid header followed by text is no image ---------------------------------------------

TEXT = b"\nAWS_SECRET_ACCESS_KEY=abc\nthis file is text, not an image\n" * 20


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def not_images() -> dict[str, bytes]:
    """Files whose header is a valid image's and whose rest is not (each names what a check must catch)."""
    head = png()[:33]                                                     # signature and IHDR, CRC right
    return {"header-then-text.png": head + TEXT,
            "text-in-idat.png": head + png_chunk(b"IDAT", TEXT) + png_chunk(b"IEND", b""),
            "zlib-text-in-idat.png": head + png_chunk(b"IDAT", zlib.compress(TEXT)) + png_chunk(b"IEND", b""),
            "bad-crc.png": png()[:-1] + b"\0", "text-after-iend.png": png() + TEXT,
            "header-then-text.gif": gif()[:13] + TEXT, "text-after-trailer.gif": gif() + TEXT,
            "no-image.gif": gif()[:13] + b";",
            "header-then-text.jpg": jpeg()[:jpeg().index(b"\xff\xc4")] + TEXT, "text-after-eoi.jpg": jpeg() + TEXT,
            "no-scan.jpg": jpeg()[:jpeg().index(b"\xff\xc4")] + b"\xff\xd9",
            "header-then-text.webp": webp()[:30] + TEXT,
            "text-chunk-no-image.webp": (lambda c: b"RIFF" + struct.pack("<I", 4 + len(c)) + b"WEBP" + c)(
                webp()[12:30] + webp_chunk("TEXT", TEXT)),
            "text-as-vp8l.webp": (lambda c: b"RIFF" + struct.pack("<I", 4 + len(c)) + b"WEBP" + c)(
                webp_chunk("VP8L", b"\0" + WEBP_BODIES["VP8L"][1:5] + TEXT)),        # 9x8, no signature
            "text-after-riff.webp": webp() + TEXT,
            # rt37c 25: the size checked is the screen's or canvas's; a frame past it was not
            "frame-past-screen.gif": b"GIF89a" + struct.pack("<HHBBB", 1, 1, 0, 0, 0) + b","
            + struct.pack("<HHHH", 0, 0, 60000, 60000) + b"\0\2\2D\1\0;",
            "frame-past-canvas.webp": (lambda c: b"RIFF" + struct.pack("<I", 4 + len(c)) + b"WEBP" + c)(
                webp_chunk("VP8X", bytes(10)) + webp_chunk("VP8L", WEBP_BODIES["VP8L"]))}       # 1x1 around 9x8


def test_a_valid_header_followed_by_text_is_refused_by_read_file_and_at_path(ws):
    """rt24 18, 45: only the header was checked, so a .png (.gif, .jpg, .webp) of a header then text went to the
    API as an image; now the whole file must be the image: chunks, blocks or segments walked to its end."""
    bad = not_images()
    for name, data in bad.items():
        (ws / name).write_bytes(data)
        assert kesi.image_size(data), name            # each passes the header check alone
    calls = [tool_call("read_file", {"file_path": name}, id=f"t{i}") for i, name in enumerate(bad)]
    prompt = "see " + " ".join(f"@{name}" for name in bad)
    with MockAPI([reply("", *calls), "none of them is an image"]) as mock:
        done = run(ws, "-p", prompt, mock=mock)
    assert done.returncode == 0, done.stderr
    assert all(r["status"] == 200 for r in mock.requests)
    assert not [m for r in mock.requests for m in r["body"]["messages"] if images_in(m["content"])]
    for name in bad:
        assert f"(@{name} not attached: {name} starts as a" in done.stderr, (name, done.stderr)
    results = [b for b in mock.requests[1]["body"]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert len(results) == len(bad), results
    assert all(r["is_error"] and "Only whole images are shown" in kesi.text_of(r["content"]) for r in results), results
    for name, what in [("text-in-idat.png", "IDAT"), ("bad-crc.png", "'IEND' chunk is cut short or fails its CRC"),
                       ("text-after-iend.png", "follow its end (IEND)"), ("no-image.gif", "holds no image"),
                       ("text-after-eoi.jpg", "follow its end (EOI)"), ("no-scan.jpg", "holds no scan"),
                       ("text-chunk-no-image.webp", "holds no image data"), ("text-after-riff.webp", "RIFF size"),
                       ("frame-past-screen.gif", "lies outside its 1x1 screen"),
                       ("frame-past-canvas.webp", "lies outside its 1x1 canvas")]:
        assert what in kesi.read_file(name)[0], (name, kesi.read_file(name)[0])


def test_real_images_of_every_kind_pass_the_whole_file_check():
    """What a check of the whole file must still let through: interlaced and 1-bit PNG, comments, several images."""
    def interlaced_png(width, height):
        rows = b"".join((b"\0" + b"\x80" * 3 * -(-(width - x) // dx)) * -(-(height - y) // dy)
                        for x, y, dx, dy in kesi.ADAM7 if width > x and height > y)
        return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 1))
                + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))
    one_bit = (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", 9, 3, 1, 0, 0, 0, 0))
               + png_chunk(b"IDAT", zlib.compress(b"\0\xff\x80" * 3)) + png_chunk(b"IEND", b""))
    two_frames = gif()[:-1] + b"!\xfe\5hello\0" + gif()[13:]                # a comment, a second image
    for data in [interlaced_png(13, 5), interlaced_png(1, 1), one_bit, png(padding=5), two_frames, jpeg(20, 17),
                 webp("VP8L"), webp("VP8 "), webp()]:
        kind = kesi.image_size(data)[0]
        assert kesi.image_damage(kind, data) == "", (kind, kesi.image_damage(kind, data))


def test_an_image_the_api_cannot_process_is_taken_out_and_the_turn_goes_on(ws, mock_client):
    """rt38c 3, 6, 18, 19: a PNG whose filter byte or bit depth no decoder takes, whole by KeSi's checks, was sent;
    the API's 400 ("Could not process image") then came back for every later request of the session."""
    from mock_api import error
    data, _, _ = FORMATS["shot.png"]
    (ws / "shot.png").write_bytes(data)
    mock, client = mock_client([reply("Let me look.", tool_call("read_file", {"file_path": "shot.png"})),
                                error(400, "messages.2.content.0.content.1: Could not process image"),
                                "It could not be read."])
    history = [{"role": "user", "content": "look at the shot"}]
    answer = kesi.run_agent(client, history)
    assert answer.ok and answer.text == "It could not be read.", answer.text
    resent = mock.requests[2]["body"]["messages"][-1]["content"][0]["content"]
    assert [block["type"] for block in resent] == ["text", "text"], resent
    assert "could not process an image" in kesi.UI.getvalue()
