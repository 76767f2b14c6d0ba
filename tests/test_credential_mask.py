"""Credentials in command output are masked before the model or the session file sees them.

The tokens are made up but well-formed (random characters in each format),
and they reach KeSi the way they would for real: a `cat` of a config file
through run_command (with the sandbox on where it works, and off), and a
real `kesi.py -p` child whose request to the mock and saved session are read
back. Ordinary command output must come through unchanged.
"""
import json
import re
import secrets
import string
import subprocess
import sys
import threading
import time

import pytest

import checklib
import kesi
from mock_api import MockAPI, reply, tool_call

KESI = checklib.ROOT / "kesi.py"


def rand(n, alphabet=string.ascii_letters + string.digits):
    return "".join(secrets.choice(alphabet) for _ in range(n))


def upper(n):
    return rand(n, string.ascii_uppercase + string.digits)


def made_up_credentials() -> dict:
    """label -> a config line carrying one credential; the secret part is what must vanish."""
    jwt = "eyJ" + rand(20) + ".eyJ" + rand(30) + "." + rand(43, string.ascii_letters + string.digits + "_-")
    return {
        "github token": ("token = {}", "ghp_" + rand(36)),
        "github token ": ("GH = {}", "github_pat_" + rand(22) + "_" + rand(59)),
        "github token  ": ("oauth: {}", "gho_" + rand(36)),
        "anthropic key": ("anthropic = {}", "sk-ant-api03-" + rand(90, string.ascii_letters + string.digits + "-_")),
        "openai key": ("openai = {}", "sk-proj-" + rand(48)),
        "aws access key id": ("aws_access_key_id = {}", "AKIA" + upper(16)),
        "aws access key id ": ("temp = {}", "ASIA" + upper(16)),
        "aws secret key": ("aws_secret_access_key = {}", rand(40, string.ascii_letters + string.digits + "/+")),
        "slack token": ("slack: {}", "xoxb-" + rand(12, string.digits) + "-" + rand(13, string.digits) + "-" + rand(24)),
        "stripe key": ("stripe.api_key = '{}'", "sk_live_" + rand(24)),
        "stripe key ": ("restricted = {}", "rk_live_" + rand(24)),
        "stripe key  ": ("test = {}", "sk_test_" + rand(24)),
        "google api key": ("maps = {}", "AIza" + rand(35)),
        "jwt": ("Authorization: Bearer {}", jwt),
        "password": ("url = postgres://app:{}@db.example:5432/app", rand(16)),
        "secret value": ("DB_PASSWORD={}", "pw-" + rand(12)),
    }


PEM_BODY = "\n".join(rand(64, string.ascii_letters + string.digits + "+/") for _ in range(5))
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"

ORDINARY = """collected 12 items
tests/test_auth.py::test_token_refresh PASSED
password = getpass.getpass()
API_KEY = os.environ["API_KEY"]
TOKEN_EXPIRY_SECONDS=3600
commit 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b
sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
uuid 123e4567-e89b-12d3-a456-426614174000
import sklearn  # sk-learn
https://example.com/path?key=value
export GITHUB_TOKEN=$(cat ~/.token)
"""


def config_file(root) -> dict:
    creds = made_up_credentials()
    lines = [template.format(secret) for template, secret in creds.values()]
    (root / "settings.cfg").write_text("\n".join(lines) + "\n" + PEM + "\n" + ORDINARY)
    return creds


AVAILABLE = kesi.sandbox_kind()


@pytest.mark.parametrize("kind", [None] + ([AVAILABLE] if AVAILABLE else []), ids=lambda k: k or "no-sandbox")
def test_cat_of_a_config_file_masks_every_known_format(ws, kind):
    creds = config_file(ws)
    with checklib.sandbox_forced(kind):
        output, failed = kesi.run_command("cat settings.cfg")
    assert not failed, output
    for label, (template, secret) in creds.items():
        assert secret not in output, label
        assert f"[masked: {label.strip()}]" in output, label
    assert PEM_BODY.splitlines()[2] not in output and "[masked: private key]" in output
    assert "postgres://app:[masked: password]@db.example" in output     # the readable part stays
    assert "aws_secret_access_key = [masked: aws secret key]" in output
    assert ORDINARY in output                                        # ordinary output is untouched


def test_masked_before_the_model_and_the_session_file(tmp_path):
    creds = config_file(tmp_path)
    turn = [reply(tool_call("run_command", {"command": "cat settings.cfg"})), reply("done")]
    with MockAPI(turn) as mock:
        env = checklib.kesi_subprocess_env(mock, KESI_SANDBOX="off")
        proc = subprocess.run([sys.executable, str(KESI), "-p", "show me the config", "--permission-mode",
                               "bypassPermissions"], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr
    sent = json.dumps(mock.requests[1]["body"]["messages"])
    saved = "".join(path.read_text() for path in (checklib.records_of(tmp_path) / "sessions").glob("*.jsonl"))
    assert "[masked: github token]" in sent and "[masked: github token]" in saved
    for label, (_, secret) in creds.items():
        assert secret not in sent and secret not in saved and secret not in proc.stderr, label


def test_a_key_cut_at_the_end_of_a_pem_block_still_masks_the_rest():
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n(... 9000 bytes omitted ...)"
    assert kesi.mask_credentials(text) == "[masked: private key]"


# A cut (the head and tail of long output, a task's output read in pieces or trimmed to its newest bytes) must
# never split a credential into halves that each pass the mask.
TOKEN = "ghp_" + "Zq7RtY2uVw9XkP3mN8bL4cD6fG1hJ5sA0eKi"


def leaked(text: str) -> bool:
    """Whether any 12 characters of TOKEN's body are in text."""
    body = TOKEN[4:]
    return any(body[i:i + 12] in text for i in range(len(body) - 11))


@pytest.mark.parametrize("shift", range(-40, 41, 8))
def test_a_token_across_the_cut_of_long_output_is_not_shown_in_halves(ws, shift):
    (ws / "tok.txt").write_text(TOKEN)
    half = kesi.MAX_OUTPUT_BYTES // 2
    script = f"t=open('tok.txt').read(); print('A'*{half - 20 + shift}, t, 'B'*9000, t, 'C'*{half - 20 + shift})"
    (ws / "emit.py").write_text(script)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command(f"{sys.executable} emit.py")
    assert "bytes omitted" in output and not leaked(output), output[3900:4100]


def test_a_token_printed_across_two_looks_at_a_task_is_masked(ws):
    (ws / "tok.txt").write_text(TOKEN)
    (ws / "go").write_text("")
    with checklib.sandbox_forced(None):
        kesi.run_command("printf 'start\\n'; head -c 12 tok.txt; while [ -e go ]; do sleep 0.05; done; "
                         "tail -c +13 tok.txt; echo ' done'", run_in_background=True)
        task = kesi.BACKGROUND_TASKS[1]
        while len(task.output) < len("start\n") + 12:
            time.sleep(0.05)
        first, _ = kesi.background_output(1)
        (ws / "go").unlink()
        while task.proc.poll() is None:
            time.sleep(0.05)
        second, _ = kesi.background_output(1)
    assert "start" in first and "held back" in first, first
    assert "[masked: github token]" in second and " done" in second, second
    assert not leaked(first + second)


def test_a_token_cut_by_the_trim_of_a_tasks_output_is_not_shown(ws, monkeypatch):
    monkeypatch.setattr(kesi, "MAX_TASK_OUTPUT_BYTES", 1000)
    (ws / "tok.txt").write_text(TOKEN)
    (ws / "emit.py").write_text("import sys\nt=open('tok.txt').read()\n"
                                "sys.stdout.write('x ' + 'A'*3000 + ' ' + t + 'B'*965 + ' end\\nnext line\\n')\n")
    with checklib.sandbox_forced(None):
        kesi.run_command(f"{sys.executable} emit.py", run_in_background=True)
        task = kesi.BACKGROUND_TASKS[1]
        while task.proc.poll() is None:
            time.sleep(0.05)
        seen, _ = kesi.background_output(1)
        kesi.stop_background_tasks()
    logged = (checklib.records_of(ws) / "audit.jsonl").read_text()
    assert "earlier bytes were not kept" in seen and "next line" in seen, seen      # the cut line goes whole
    assert not leaked(seen) and not leaked(logged)


# Shapes a quadratic pattern would take minutes on (a run the pattern scans, then fails late, at every start):
# masking 2 MB of each must cost about what 2 MB of plain text does (measured in the same run), and still mask.
ADVERSARIAL = {"plain": "'lorem ipsum dolor sit amet ' * 80000", "a.": "'a.' * 1000000",
               "PASSWORD": "'PASSWORD' * 250000", "PASSWORD_": "'\\nA' + 'PASSWORD_' * 230000",
               "pem end": "'-----BEGIN PRIVATE KEY\\n-----END ' + 'PRIVATE KEY ' * 170000",
               "pem begin": "'-----BEGIN ' + 'PRIVATE KEY ' * 170000", "jwt": "'eyJ-' * 500000"}
REAL = f"\nDB_PASSWORD=pw-Zq7RtY2uVw9X\nurl = postgres://app:Zq7RtY2uVw9X@db\n{TOKEN}\n"
TIMED = """import sys, time, json; sys.path.insert(0, {root!r}); import kesi
for shape in {shapes!r}:
    text = eval(shape) + {real!r}
    start = time.perf_counter(); masked = kesi.mask_credentials(text); kesi.whole_lines(text.encode(), True, True)
    print(json.dumps([time.perf_counter() - start, masked[-300:]]), flush=True)"""


def test_masking_two_megabytes_of_adversarial_shapes_costs_what_plain_text_does():
    code = TIMED.format(root=str(checklib.ROOT), shapes=list(ADVERSARIAL.values()), real=REAL)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as proc:
        plain = json.loads(proc.stdout.readline())[0]
        timer = threading.Timer(60 + 20 * plain * len(ADVERSARIAL), proc.kill)      # a quadratic one: minutes
        timer.start()
        results = [json.loads(line) for line in proc.stdout]
        timer.cancel()
    assert len(results) == len(ADVERSARIAL) - 1, f"masking took over 20 times plain text's {plain:.2f} s"
    for name, (seconds, tail) in zip(list(ADVERSARIAL)[1:], results):
        assert seconds <= 20 * max(plain, 0.05), (name, seconds, plain)
        assert "Zq7RtY2uVw9X" not in tail and not leaked(tail), (name, tail)
        assert "DB_PASSWORD=[masked: secret value]" in tail and "postgres://app:[masked: password]@db" in tail


# rt25i: what hides a credential from the patterns (NULs of UTF-16/32, a terminal's colour codes), the patterns
# that span spaces (an aws key's `name = value`, a PEM header) at a cut, quoted values, URLs with an empty user.
def shows(secret: str, *texts: str) -> bool:
    """Whether any 10 characters of secret are in texts, read as a terminal shows them (no NULs, no colours)."""
    plain = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\x00", "", "".join(texts))
    return any(secret[i:i + 10] in plain for i in range(len(secret) - 9))


def audit_outputs(ws) -> str:
    """The outputs the audit log (what /log shows) holds."""
    lines = (checklib.records_of(ws) / "audit.jsonl").read_text().splitlines()
    return "".join(json.loads(line.partition(" ")[2]).get("output", "") for line in lines)


def run_in_task(ws, command: str, *, release=None) -> str:
    """background_output of a task running command, before and after the file `go` is removed; all it showed."""
    (ws / "go").write_text("")
    with checklib.sandbox_forced(None):
        kesi.run_command(command, run_in_background=True)
        task = kesi.BACKGROUND_TASKS[max(kesi.BACKGROUND_TASKS)]
        while len(task.output) < (release or 1):
            time.sleep(0.05)
        first, _ = kesi.background_output(task.id)
        (ws / "go").unlink()
        while task.proc.poll() is None:
            time.sleep(0.05)
        second, _ = kesi.background_output(task.id)
        kesi.stop_background_tasks()
    return first + second


AWS_KEY = rand(40, string.ascii_letters + string.digits + "/+")
WAIT = "while [ -e go ]; do sleep 0.05; done"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_credentials_in_utf16_or_utf32_output_are_masked(ws, encoding):
    creds = made_up_credentials()
    (ws / "creds.txt").write_bytes(("\n".join(t.format(s) for t, s in creds.values()) + "\n").encode(encoding))
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat creds.txt")
    assert "[masked: github token]" in output and "[masked: secret value]" in output, output
    for label, (_, secret) in creds.items():
        assert not shows(secret, output) and not shows(secret, audit_outputs(ws)), label


@pytest.mark.parametrize("command", ["grep --color=always -E 'gh|sk|AK|AS|_key|xox|AIza|eyJ|://|PASS|BEGIN' -A6 "
                                     "settings.cfg", "rg --color always -N -A6 'gh|sk|AK|AS|_key|://|PASS|BEGIN' "
                                     "settings.cfg"])
def test_credentials_coloured_by_grep_are_masked(ws, command):
    creds = config_file(ws)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command(command)
    assert "\x1b[" in output and "[masked: github token]" in output, output
    for label, (_, secret) in creds.items():
        assert not shows(secret, output) and not shows(secret, audit_outputs(ws)), label
    assert not shows(PEM_BODY.splitlines()[1], output)


@pytest.mark.parametrize("end", ["head", "tail"])
@pytest.mark.parametrize("at", [1, 10, 21, 22, 23, 24, 25, 40])
def test_an_aws_key_across_the_cut_of_long_output_is_not_shown(ws, end, at):
    line, half = f"aws_secret_access_key = {AWS_KEY}\n", kesi.MAX_OUTPUT_BYTES // 2
    filler = "log line ok\n" * 1000
    if end == "tail":       # the kept tail starts `at` characters into the line
        data = filler + "[prod]\n" + line + filler[:half - len(line) + at]
    else:                   # the kept head ends there
        data = filler[:half - at] + line + filler
    (ws / "deploy.log").write_text(data)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat deploy.log")
    assert "bytes omitted" in output and not shows(AWS_KEY, output, audit_outputs(ws)), output[3900:4200]


@pytest.mark.parametrize("at", [10, 22, 23, 24, 30])
def test_an_aws_key_printed_in_two_pieces_by_a_task_is_masked(ws, at):
    (ws / "aws.txt").write_text(f"[default]\naws_secret_access_key = {AWS_KEY}\nafter\n")
    seen = run_in_task(ws, f"head -c {10 + at} aws.txt; {WAIT}; tail -c +{11 + at} aws.txt", release=10 + at)
    assert "after" in seen and not shows(AWS_KEY, seen), seen


@pytest.mark.parametrize("at", [5, 23, 40, 200])
def test_a_private_key_printed_in_two_pieces_by_a_task_is_masked(ws, at):
    (ws / "key.txt").write_text(PEM.replace("RSA", "OPENSSH") + "\n")
    seen = run_in_task(ws, f"echo before; head -c {at} key.txt; {WAIT}; tail -c +{at + 1} key.txt; echo done",
                       release=len("before\n") + at)
    assert "before" in seen and "done" in seen, seen
    assert not any(shows(line, seen) for line in PEM_BODY.splitlines()), seen


def key_without_end(lines: int) -> tuple[str, list[str]]:
    body = [rand(64, string.ascii_letters + string.digits + "+/") for _ in range(lines)]
    return "backup log line\n" * 300 + "-----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(body) + "\n", body


@pytest.mark.parametrize("lines", [3, 200])
def test_output_ending_inside_a_private_key_shows_none_of_it(ws, lines):
    text, body = key_without_end(lines)
    (ws / "backup.txt").write_text(text)
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat backup.txt")
    assert "backup log line" in output and not any(shows(line, output, audit_outputs(ws)) for line in body)


def test_a_private_key_cut_by_the_trim_of_a_tasks_output_shows_none_of_it(ws, monkeypatch):
    monkeypatch.setattr(kesi, "MAX_TASK_OUTPUT_BYTES", 1000)
    text, body = key_without_end(200)
    (ws / "backup.txt").write_text(text)
    seen = run_in_task(ws, f"cat backup.txt; {WAIT}; echo '-----END RSA PRIVATE KEY-----'; echo after",
                       release=len(text))
    assert "earlier bytes were not kept" in seen and "after" in seen, seen
    assert not any(shows(line, seen, audit_outputs(ws)) for line in body), seen


def test_a_quoted_secret_value_is_masked_up_to_its_quote(ws):
    words = [rand(8, string.ascii_lowercase) for _ in range(8)]
    (ws / "deploy.sh").write_text(f'export DB_PASSWORD="{" ".join(words[:4])}"\nAPI_TOKEN=\'{" ".join(words[4:])}\'\n'
                                  'GITHUB_TOKEN="$(cat ~/.token)"\n')
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat deploy.sh")
    assert 'DB_PASSWORD="[masked: secret value]"' in output and "API_TOKEN='[masked: secret value]'" in output
    assert '"$(cat ~/.token)"' in output and not any(word in output for word in words), output


def test_a_url_password_with_an_empty_user_name_is_masked(ws):
    secrets_ = [rand(16) for _ in range(3)]
    (ws / "compose.yml").write_text(f"REDIS_URL: redis://:{secrets_[0]}@cache:6379/0\n"
                                    f"AMQP_URL: amqp://app:{secrets_[1]}@mq:5672/\nurl = https://:{secrets_[2]}@h/\n")
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat compose.yml")
    assert "redis://:[masked: password]@cache" in output and "https://:[masked: password]@h/" in output, output
    assert not any(secret in output for secret in secrets_)


def test_a_token_with_overstrikes_or_invisible_characters_inside_is_masked(ws):
    body = TOKEN[4:]
    (ws / "emit.py").write_text(f"print('bold: ' + ''.join(c + '\\b' + c for c in {TOKEN!r}))\n"
                                f"print('zero width: ghp_' + '\\u200b'.join({body!r}))\n")
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command(f"{sys.executable} emit.py")
    assert output.count("[masked: github token]") == 2 and not leaked(output.replace("\b", "")), output


def test_neighbours_of_the_masked_formats_are_masked_too(ws):
    """rt25k: escapes of another shape (tput sgr0 is ESC ( B), an @ in a URL password, more token prefixes,
    the AWS CLI's JSON, bash's declare -x, more invisible characters inside a token."""
    key, npm, secret, aws = "AKIA" + rand(16).upper(), "npm_" + rand(36), rand(20), rand(40)
    lines = [f"sgr0 \x1b(B{key}\x1b(B", f"\x1b)0{key}", f"{npm}\x1b#8", f"https://u:p@{secret}@host/x",
             f"https://:p@{secret}@host/x", "glrt-" + rand(24), "gldt-" + rand(24), "xoxe-1-" + rand(20),
             f'{{"SecretAccessKey": "{aws}"}}', f'declare -x DB_PASSWORD="{secret}"',
             *(key[:4] + hidden + key[4:] for hidden in ("\u00ad", "\u034f", "\u2063", "\u180e", "\r", "\x0b"))]
    (ws / "out.txt").write_text("\n".join(lines) + "\n")
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat out.txt")
    for line in lines:
        assert kesi.mask_credentials(line) != line, repr(line)
    for value in (key, key[4:], npm, secret, aws, lines[5][5:], lines[6][5:], lines[7][7:]):
        assert value not in output and value not in audit_outputs(ws), (value, output)


def test_tokens_glued_to_text_escapes_hidden_by_invisible_characters_and_more_neighbours_are_masked(ws):
    """rt25l: a token right after \\n, %20 or \\u0022 (no word boundary), escaped URL slashes, the STS XML,
    set -x traces, JSON lists; tag, selector and isolate characters inside; more token families."""
    token, secret, aws = "ghp_" + rand(36), rand(20), rand(40)
    lines = [f"a\\n{token}", f"q=%20{token}", f"\\u0022{token}", f"https:\\/\\/u:{secret}@host",
             f"<SecretAccessKey>{aws}</SecretAccessKey>", f"+ export API_TOKEN={secret}",
             f'["A=1","DB_PASSWORD={secret}"]',
             *(token[:4] + c + token[4:] for c in ("\U000e0041", "\ufe0f", "\u2066")),
             "xoxc-" + rand(20), "glffct-" + rand(24), "AGE-SECRET-KEY-1" + rand(58).upper(),
             "PrivateKey = " + rand(43) + "=", "ABSK" + rand(60), "secret_access_key = " + rand(40),
             "https://hooks.slack.com/triggers/T0/1/" + rand(20),
             "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\n" + rand(40) + "\n---- END SSH2 ENCRYPTED PRIVATE KEY ----"]
    (ws / "out.txt").write_text("\n".join(lines) + "\n")
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat out.txt")
    for line in lines:
        assert kesi.mask_credentials(line) != line, repr(line)
    for value in (token[4:], secret, aws):
        assert value not in output and value not in audit_outputs(ws), (value, output)
    assert kesi.mask_credentials("risk-assessment-and-mitigation plan; 100%25 done") == \
        "risk-assessment-and-mitigation plan; 100%25 done"


def test_tokens_in_escaped_utf16_after_escaped_colours_and_assignments_after_a_blank_are_masked(ws):
    """rt25m: UTF-16 text with its NULs shown as cat -v, repr or sed -n l do (^@, \\x00, \\000); a token after an
    escaped colour code; a URL password with # / ?; aws-secret-access-key: and secret_key =; ENV, - X=, ps."""
    token, secret = "ghp_" + rand(36), rand(16)
    lines = ["^@".join(token), "b'" + "".join(c + "\\x00" for c in token) + "'", "".join("\\000" + c for c in token),
             "'\\x1b[1m" + token + "'", "\\u001b[32m" + token, "^[[31m" + token, f"postgresql://u:p#{secret}/x@db",
             "aws-secret-access-key: " + secret + rand(24), 'secret_key = "' + secret + rand(24) + '"',
             f"  - POSTGRES_PASSWORD={secret}", f"ENV API_TOKEN={secret}", f"USER=x DB_PASSWORD={secret} ls"]
    (ws / "out.txt").write_text("\n".join(lines) + "\n")
    with checklib.sandbox_forced(None):
        output, _ = kesi.run_command("cat out.txt")
    for line in lines:
        assert kesi.mask_credentials(line) != line, repr(line)
    assert token[4:] not in output.replace("^@", "").replace("\\x00", "").replace("\\000", "") and secret not in output


def test_assignments_with_numeric_starts_quoted_names_and_escaped_tput_resets_are_masked(ws):
    """rt25n: TELEGRAM_BOT_TOKEN=123:..., "X_PASSWORD=..." after a blank, --env=, a=1;X=, set -x's quoted word;
    an escaped tput sgr0 (^[(B, \\033(B) or Rust's \\u{1b} before a token; a one-character CSI inside one."""
    token, secret = "ghp_" + rand(36), rand(16)
    aws = "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + rand(10)
    lines = [f"TELEGRAM_BOT_TOKEN=123456789:{secret}", f"DB_PASSWORD=2024-{secret}",
             f'  - "POSTGRES_PASSWORD={secret}"', f'docker run -e "REDIS_PASSWORD={secret}"',
             f"--env=DB_PASSWORD={secret}", f"a=1;DB_PASSWORD={secret}",
             f"+ export 'DB_PASSWORD=Winter is {secret}; 2024!'",
             "Token:^[(B^[[m" + token, "Token:\\033(B\\033[m" + token, "\\u{1b}[0m" + token,
             token[:10] + "\x9b-m" + token[10:], '"SecretAccessKey":"' + aws.replace("/", "\\/") + '"',
             '\\"SecretAccessKey\\":\\"' + aws + '\\"', "private-key=" + rand(43) + "=", f"['API_TOKEN={secret}']"]
    for line in lines:
        masked = kesi.mask_credentials(line)
        assert masked != line and secret not in masked and token[4:] not in masked and aws[-10:] not in masked, line
    for plain in ("PORT=8080", "MAX_TOKENS=4096", "TOKEN_LIMIT=100 ok"):
        assert kesi.mask_credentials(plain) == plain


def test_an_all_digit_password_and_a_value_in_escaped_json_quotes_are_masked():
    """rt25o: the all-digit exception (TOKEN_TTL=3600) let numeric passwords through; \\" hid a quoted value."""
    secret = "4815162342108"
    for line in (f'export DB_PASSWORD="{secret}"', f"ADMIN_PASSWORD={secret}",
                 '"export API_TOKEN=\\"Zq8 long secret phrase\\""'):
        masked = kesi.mask_credentials(line)
        assert secret not in masked and "secret phrase" not in masked, masked
    for plain in ("TOKEN_TTL=3600", "MAX_TOKENS=4096"):
        assert kesi.mask_credentials(plain) == plain
