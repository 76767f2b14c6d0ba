"""A red-team battery for the file tools, counted (issue 10, classes 2, 3 and 6).

Every attempt tries to make a file tool (or KeSi's own writes under .kesi)
show a secret, write outside the workspace, or touch an ignored name: in any
case, at any depth, through symlinks of every shape, through grep's globs.
An attempt leaks if its output holds a canary marker, or if anything outside
the workspace or any ignored file changed. The battery reports the count of
attempts and requires zero leaks. The concurrent-swapper races are in
test_file_races.py.
"""
import io
import os
import uuid

import pytest

import kesi

SECRET = "LEAK-[0-9a-f]{32}"     # finds any marker; "No matches for ..." does not echo one

# Ignored names in other cases, at other depths, next to each other.
IGNORED_PATHS = [
    ".env", "cfg/.ENV", ".Env.local", "sub/.env.example", ".env.PROD", "deep/x/.eNv.local",
    "NODE_MODULES/x.js", "node_modules/pkg/.env", "a/b/.GIT/config", "deep/.git/modules/sub/config",
    "x/.KESI/sessions/s.jsonl", "Venv/lib/x.py", "a/.VENV/bin/activate", "__PYCACHE__/m.txt",
    "src/.Pytest_Cache/v", "pkg/.ds_store", "k/.\u212aESI/x",          # a Kelvin sign: casefolds to .kesi
    "we:ird/.ENV", "sp ace/.env.local",
]


@pytest.fixture
def arena(ws, tmp_path_factory):
    marker = f"LEAK-{uuid.uuid4().hex}"
    outside = tmp_path_factory.mktemp("home")
    (outside / "id_rsa").write_text(f"{marker} private key\n")
    (outside / "dir").mkdir()
    (outside / "dir" / "secret.txt").write_text(f"{marker} in a folder\n")
    for rel in IGNORED_PATHS:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(f"{marker} {rel}\n")
    (ws / "ok.txt").write_text("fine\n")
    return Arena(ws, outside, marker)


class Arena:
    def __init__(self, ws, outside, marker):
        self.ws, self.outside, self.marker = ws, outside, marker
        self.attempts, self.leaks = 0, []
        self.before = self.state()

    def state(self):
        files = [p for p in self.outside.rglob("*")] + [self.ws / rel for rel in IGNORED_PATHS]
        return sorted((str(p), p.read_bytes() if p.is_file() else None) for p in files)

    def attempt(self, name, call):
        self.attempts += 1
        try:
            output, _ = call()
        except Exception as exc:        # a tool that raises is a failure too, not a leak
            output = f"raised {exc!r}"
            self.leaks.append((name, output))
        state = self.state()
        if self.marker in str(output) or state != self.before:
            self.leaks.append((name, str(output)[:200]))
            self.before = state


def parent_of(rel):
    return rel.rsplit("/", 1)[0] if "/" in rel else "."


def test_ignored_names_are_hidden_from_every_tool_in_any_case_and_depth(arena):
    a = arena
    for rel in IGNORED_PATHS:
        name = rel.rsplit("/", 1)[-1]
        a.attempt(f"read_file {rel}", lambda: kesi.read_file(rel))
        a.attempt(f"edit_file {rel}", lambda: kesi.edit_file(rel, "LEAK", "x"))
        a.attempt(f"write_file {rel}", lambda: kesi.write_file(rel, "overwritten\n"))
        a.attempt(f"grep in {parent_of(rel)}", lambda: kesi.grep(SECRET, path=parent_of(rel)))
        a.attempt(f"grep glob {name}", lambda: kesi.grep(SECRET, glob=name))
        a.attempt(f"grep glob **/{name}", lambda: kesi.grep(SECRET, glob=f"**/{name}", ignore_case=True))
        a.attempt(f"list_files {parent_of(rel)}", lambda: hide_check(kesi.list_files(parent_of(rel)), parent_of(rel), a))
        a.attempt(f"glob **/{name}", lambda: hide_check(kesi.glob_files(f"**/{name}"), None, a))
        a.attempt(f"glob {rel}", lambda: hide_check(kesi.glob_files(rel), None, a))
        link = f"innocent-{abs(hash(rel))}.txt"
        (a.ws / link).symlink_to(a.ws / rel)
        a.attempt(f"read_file via a link to {rel}", lambda: kesi.read_file(link))
        a.attempt(f"grep via a link to {rel}", lambda: kesi.grep(SECRET, path=link))
    a.attempt("grep everything", lambda: kesi.grep(SECRET))
    a.attempt("grep everything, any case", lambda: kesi.grep(SECRET.lower(), ignore_case=True))
    a.attempt("glob everything", lambda: hide_check(kesi.glob_files("**/*"), None, a))
    report(a, minimum=200)


def hide_check(result, folder, a):
    """Listings show names, not contents: leaking means showing an ignored path."""
    output, is_error = result
    prefix = "" if folder in (None, ".") else folder + "/"
    if any(prefix + line.rstrip("/") in IGNORED_PATHS for line in output.splitlines()):
        return f"{a.marker} listed in {output[:100]!r}", is_error
    return result


def test_symlinks_of_every_shape_lead_nowhere_outside(arena):
    a, ws, out = arena, arena.ws, arena.outside
    (ws / "deep" / "er").mkdir(parents=True, exist_ok=True)
    links = {
        "abs-file": out / "id_rsa", "abs-dir": out / "dir",
        "deep/er/rel-file": "../../../" * 3 + str(out).lstrip("/") + "/id_rsa",
        "rel-up": "..", "deep/er/rel-dir": f"../../{'../' * 8}{str(out).lstrip('/')}/dir",
        "chain1": "chain2", "chain2": str(out / "id_rsa"), "loop1": "loop2", "loop2": "loop1",
        "via-inside": "deep/../abs-dir", "to-ignored-dir": "node_modules",
        "dangling-outside": out / "new-file.txt", "dangling-dir-outside": out / "newdir",
    }
    for rel, target in links.items():
        (ws / rel).symlink_to(target)
    for rel in links:
        a.attempt(f"read_file {rel}", lambda: kesi.read_file(rel))
        a.attempt(f"read_file {rel}/secret.txt", lambda: kesi.read_file(f"{rel}/secret.txt"))
        a.attempt(f"grep {rel}", lambda: kesi.grep(SECRET, path=rel))
        a.attempt(f"list_files {rel}", lambda: kesi.list_files(rel))
        a.attempt(f"glob {rel}/*", lambda: kesi.glob_files(f"{rel}/*"))
        a.attempt(f"edit_file {rel}", lambda: kesi.edit_file(rel, "LEAK", "x"))
        a.attempt(f"write_file {rel}", lambda: kesi.write_file(rel, "x\n"))
        a.attempt(f"write_file {rel}/new.txt", lambda: kesi.write_file(f"{rel}/new.txt", "x\n"))
        a.attempt(f"write_file {rel}/a/b.txt", lambda: kesi.write_file(f"{rel}/a/b.txt", "x\n"))
    for spelled in (str(out / "id_rsa"), f"{ws}/../{out.name}/id_rsa", "../id_rsa", "~/id_rsa",
                    f"{ws}/abs-file", f"{ws}/deep/../../{out.name}/id_rsa"):
        a.attempt(f"read_file {spelled}", lambda: kesi.read_file(spelled))
        a.attempt(f"grep {spelled}", lambda: kesi.grep(SECRET, path=spelled))
        a.attempt(f"write_file {spelled}", lambda: kesi.write_file(spelled, "x\n"))
    (ws / "AGENTS.md").symlink_to(out / "id_rsa")
    (ws / "CLAUDE.md").symlink_to(ws / ".env")
    a.attempt("memory file AGENTS.md -> outside", lambda: (kesi.project_memory() or "", False))
    assert not (out / "new-file.txt").exists() and not (out / "newdir").exists()
    report(a, minimum=130)


def test_kesi_own_writes_never_follow_planted_links(arena, monkeypatch):
    readline = pytest.importorskip("readline")
    a, ws, out = arena, arena.ws, arena.outside
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    history = [{"role": "user", "content": f"$(cat ~/.ssh/id_rsa) {uuid.uuid4().hex}"}]
    plants = [(".kesi/prompt-history", out / "id_rsa"), (".kesi/sessions", out / "dir"),
              (".kesi/.gitignore", out / "id_rsa"), (".kesi", out / "dir"), (".kesi", out / "gone"),
              (".kesi/sessions", out / "gone"), (".kesi/cache", out / "dir")]
    for rel, target in plants:
        for path in (ws / ".kesi" / "sessions", ws / ".kesi"):
            if path.is_symlink():
                path.unlink()
        kesi.SESSION_FILE = None
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        if (ws / rel).is_dir() and not (ws / rel).is_symlink():
            for f in (ws / rel).rglob("*"):
                if f.is_file() or f.is_symlink():
                    f.unlink()
            for d in sorted((ws / rel).rglob("*"), reverse=True):
                d.rmdir()
            (ws / rel).rmdir()
        elif (ws / rel).is_symlink() or (ws / rel).exists():
            (ws / rel).unlink()
        (ws / rel).symlink_to(target)
        readline.add_history("echo planted")
        a.attempt(f"save_session with {rel} -> {target.name}", lambda: (kesi.save_session(history), False))
        a.attempt(f"save_prompt_history with {rel} -> {target.name}",
                  lambda: (kesi.save_prompt_history(), False))
        a.attempt(f"kesi_folder('cache') with {rel} -> {target.name}",
                  lambda: (safe_call(lambda: os.close(kesi.kesi_folder("cache"))), False))
    assert not (out / "gone").exists()
    report(a, minimum=21)


def safe_call(func):
    try:
        return func()
    except OSError as exc:             # refusing with an OSError is the promised behaviour
        return str(exc)


def report(a, minimum):
    print(f"\n{a.attempts} attempts, {len(a.leaks)} leaks")
    assert a.attempts >= minimum
    assert a.leaks == [], a.leaks[:10]
