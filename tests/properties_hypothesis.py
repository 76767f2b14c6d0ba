"""Property tests: every tool returns (str, bool) and never raises, whatever it is given.

Not collected by default (the name does not start with test_): hypothesis is
not one of KeSi's dependencies. tests/test_tool_properties.py runs this file,
in-process when hypothesis is importable, otherwise in a child
`uv run --with hypothesis ... pytest tests/properties_hypothesis.py`.

Inputs are arbitrary JSON-ish values (None, bools, huge ints, floats, text
with NUL, lone surrogates, '..', '~', '/', 100k-character strings, nested
lists and dicts) for every parameter of every tool, both through
kesi.call_tool (the model's route) and by calling the functions directly.

run_command is the one tool kept on a leash: call_tool skips the permission
layer, so hypothesis only ever gets to choose what `echo` prints (quoted) and
the timeout; COMMAND_TIMEOUT is 2 s. The task tool talks to the mock API.
"""
from __future__ import annotations

import inspect
import json
import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import checklib
import kesi

EXAMPLES = 100
FAST = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

# Names that exist in the jail, so that arbitrary paths often hit something real.
JAIL_FILES = {"a.txt": "alpha\nbeta\n", "sub/b.py": "print('b')\n", ".env": "KEY=secret\n",
              "crlf.txt": "x\r\ny\r\n", "bin.dat": b"\x00\x01\x02", "latin1.txt": b"caf\xe9\n"}

SPECIAL_TEXT = st.sampled_from([
    "", " ", ".", "..", "../", "./", "~", "~/", "/", "//", "\\", "\x00", "a\x00b", "\ud800",
    "\udcff", "\u202e", "é", "\n", "\r\n", "\t", "-", "--", "--files", "-e", "--pre=sh",
    "*", "**", "**/*", "*/**/", "?", "[", "[!", "[]", "]", "{", "{a,b}", "!", "!*.py",
    ".env", ".env.local", ".git", ".git/config", "node_modules", "a.txt", "sub", "sub/b.py",
    "crlf.txt", "bin.dat", "latin1.txt", "fifo", "link_out", "C:\\", "C:", "\\\\server\\share",
    "nul", "/dev/zero", "/etc/passwd", "/proc/self/environ", "(", "(a", "$HOME", "`id`",
])
# Long strings are built, not listed: a 100 kB literal would make every repr huge.
LONG_TEXT = st.tuples(st.sampled_from(["a", "../", "x/", "é", "\x00"]), st.integers(1000, 100_000)).map(
    lambda pair: (pair[0] * pair[1])[:100_000])
ANY_CHAR_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)   # surrogates included
TEXT = st.one_of(SPECIAL_TEXT, ANY_CHAR_TEXT, LONG_TEXT,
                 st.lists(st.one_of(SPECIAL_TEXT, ANY_CHAR_TEXT), max_size=5).map("/".join))
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                    st.sampled_from([0, 1, -1, 2**31, 2**63, 10**30]),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT)
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                       | st.dictionaries(ANY_CHAR_TEXT | SPECIAL_TEXT, inner, max_size=4),
                       max_leaves=8)
TODO_ITEMS = st.lists(st.fixed_dictionaries(
    {"content": JSONISH | TEXT, "status": st.sampled_from(["pending", "in_progress", "completed"]) | JSONISH}),
    max_size=4)


def echo_command():
    """The only commands hypothesis may run: echo with quoted arbitrary text."""
    return TEXT.map(lambda text: "echo " + shlex.quote(text))


def value_for(tool: str, param: str):
    if tool == "run_command" and param == "command":
        return st.one_of(echo_command(), SCALARS.filter(lambda v: not isinstance(v, str)))
    if tool == "todo_write" and param == "todos":
        return st.one_of(TODO_ITEMS, JSONISH)
    return JSONISH


def arguments(tool: str):
    """Keyword arguments for one tool: required ones always, optional ones sometimes."""
    params = inspect.signature(kesi.TOOL_FUNCS[tool]).parameters
    required = {n: value_for(tool, n) for n, p in params.items() if p.default is inspect.Parameter.empty}
    optional = {n: value_for(tool, n) for n, p in params.items() if p.default is not inspect.Parameter.empty}
    return st.fixed_dictionaries(required, optional=optional)


def model_input(tool: str):
    """What a model might send: the right keys, extra keys, missing keys, or not a dict."""
    extra = st.dictionaries(ANY_CHAR_TEXT | SPECIAL_TEXT, JSONISH, max_size=2)
    with_extra = st.tuples(arguments(tool), extra).map(lambda pair: {**pair[1], **pair[0]})
    if tool == "run_command":      # never let an extra key decide what runs
        return st.one_of(arguments(tool), st.lists(JSONISH, max_size=3))
    return st.one_of(arguments(tool), with_extra, extra, st.lists(JSONISH, max_size=3), SCALARS)


TOOL_NAMES = sorted(kesi.TOOL_FUNCS)


@pytest.fixture(scope="module")
def jail():
    """A jail with some real files, a FIFO and a symlink out; the mock API for task."""
    top = Path(tempfile.mkdtemp(prefix="kesi-props-")).resolve()
    root = top / "ws"
    checklib.write_files(root, JAIL_FILES)
    os.mkfifo(root / "fifo")
    open(os.fsencode(root) + b"/caf\xe9.txt", "w").close()    # a name that is not UTF-8
    (top / "outside.txt").write_text("outside\n")
    (root / "link_out").symlink_to(top / "outside.txt")
    saved = (kesi.BASE_DIR, kesi.COMMAND_TIMEOUT, kesi.UI, kesi.CLIENT)
    checklib.fresh_state()
    checklib.use_base_dir(root)
    kesi.COMMAND_TIMEOUT = 2
    # A real, strict UTF-8 stream: a lone surrogate printed by a tool must not raise.
    kesi.UI = open(os.devnull, "w", encoding="utf-8")
    try:
        with checklib.mock_client(max_retries=0):
            yield top
    finally:
        kesi.UI.close()
        kesi.BASE_DIR, kesi.COMMAND_TIMEOUT, kesi.UI, kesi.CLIENT = saved
        checklib.fresh_state()
        assert sorted(p.name for p in top.iterdir()) == ["outside.txt", "ws"], "a tool wrote outside the jail"
        assert (top / "outside.txt").read_text() == "outside\n", "a tool changed a file outside the jail"
        # rm -rf, not shutil.rmtree: a generated path can nest folders deeper
        # than Python's recursion limit (rmtree recurses on Python 3.11).
        subprocess.run(["rm", "-rf", str(top)], check=True)


def assert_tool_result(result) -> None:
    assert isinstance(result, tuple) and len(result) == 2, result
    output, is_error = result
    assert type(output) is str and type(is_error) is bool, result


def is_sendable(value) -> bool:
    """Could this be part of an API request (UTF-8 JSON)?"""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return True
    except (UnicodeEncodeError, ValueError, TypeError):
        return False


@pytest.mark.parametrize("tool", TOOL_NAMES)
@FAST
@given(data=st.data())
def test_call_tool_never_raises(jail, tool, data):
    tool_input = data.draw(model_input(tool), label="input")
    result = kesi.call_tool({"name": tool, "input": tool_input})
    assert_tool_result(result)
    assert is_sendable(result[0]), "call_tool output must fit in the next API request"


@pytest.mark.parametrize("tool", TOOL_NAMES)
@FAST
@given(data=st.data())
def test_direct_call_never_raises(jail, tool, data):
    kwargs = data.draw(arguments(tool), label="kwargs")
    if tool == "task":
        # KNOWN gap, reported: run_agent lets the SDK's UnicodeEncodeError out for a
        # prompt with lone surrogates. The model cannot send one (the SDK's JSON
        # parser rejects them), and call_tool catches it (tested above).
        assume(is_sendable(kwargs))
    assert_tool_result(kesi.TOOL_FUNCS[tool](**kwargs))


@FAST
@given(name=TEXT, tool_input=JSONISH)
def test_unknown_tools_and_odd_inputs(jail, name, tool_input):
    if name == "run_command":
        return                      # arbitrary input must never reach the shell
    output, is_error = kesi.call_tool({"name": name, "input": tool_input})
    assert_tool_result((output, is_error))
    if name not in kesi.TOOL_FUNCS:
        assert is_error and "no tool named" in output


@FAST
@given(command=JSONISH)
def test_classify_command_never_raises(jail, command):
    """The permission verdict for any value is one of the three words."""
    verdict, reason = kesi.classify_command(command)
    assert verdict in ("deny", "ask", "allow") and isinstance(reason, str)
