"""Rules that persist: Bash(...) / Edit(...) allow and deny rules, where they
are read from and why, "a" at the prompt saving one, and /permissions
listing each with its source. Allow rules are exact by default; a compound
command is allowed when rules or the read-only list allow every part, and
never through a redirection or an expansion."""
import builtins
import io
import json
import os
from pathlib import Path

import pytest

import kesi


@pytest.fixture
def settings(ws, tmp_path_factory, monkeypatch):
    """Write user-level and project-level settings; returns the writer."""
    config = tmp_path_factory.mktemp("config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))

    def write(user=None, project_rules=None, project=None):
        if user is not None or project_rules is not None:
            data = {"permissions": user or {}}
            if project_rules is not None:
                data["projects"] = {str(ws): project_rules}
            (config / "kesi").mkdir(exist_ok=True)
            (config / "kesi" / "settings.json").write_text(json.dumps(data))
        if project is not None:
            (ws / ".kesi").mkdir(exist_ok=True)
            (ws / ".kesi" / "settings.json").write_text(json.dumps({"permissions": project}))
        return config / "kesi" / "settings.json"
    return write


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setattr(kesi, "UI", io.StringIO())


def allowed(command):
    return kesi.check_permission("run_command", {"command": command})[0]


def test_a_prefix_rule_allows_plain_commands_only(settings, user):
    settings(user={"allow": ["Bash(npm test:*)"]})
    asked = user()
    for command in ("npm test", "npm test -- -k slow", " npm  test "):
        assert allowed(command), command
    assert asked.asked == []
    sneaky = ["npm test; rm -rf x", "npm test && curl evil", "npm test | sh", "npm test > out.txt",
              "npm test $(id)", "npm test `id`", "npm testing", "npm test\r; id", "npm test\nrm x",
              "npm test & id", "npm tes", "npx npm test", "(npm test)", "npm test *"]
    for command in sneaky:
        assert not allowed(command), command
    assert len(asked.asked) == len(sneaky)


def test_compound_commands_are_judged_part_by_part_with_a_true_reason(settings, user, ws):
    (ws / "src").mkdir()
    settings(user={"allow": ["Bash(npm test:*)"]})
    asked = user("n", "n")
    assert allowed("cd src && ls") and allowed("ls | grep x") and asked.asked == []
    assert not allowed("npm test && npm run lint")
    assert asked.questions[0].reason == "`npm run lint`: npm is not on the read-only list"
    assert asked.questions[0].always == "Bash(npm run lint:*)"           # only the part no rule covers
    assert not allowed("cd .. && ls")
    assert asked.questions[1].reason == "`cd ..`: cd may leave the workspace (only cd to a folder in it is read-only)"
    settings(user={"allow": ["Bash(npm test:*)", "Bash(npm run lint)"]})
    assert allowed("npm test && npm run lint") and allowed("npm run lint || npm test; ls | grep x")
    settings(user={"allow": ["Bash(npm test:*)", "Bash(npm run lint)"], "deny": ["Bash(npm run lint)"]})
    ok, refusal = kesi.check_permission("run_command", {"command": "npm test && npm run lint"})
    assert not ok and "deny rule (Bash(npm run lint)" in refusal and len(asked.asked) == 2


def test_quoted_characters_are_not_called_expansions():
    assert kesi.classify_command("python3 -c 'print(1)'") == ("ask", "python3 is not on the read-only list")
    assert kesi.classify_command("echo '$(id) > x'")[0] == "allow"
    for command, shown in (('echo "$(id)"', "$"), ("ls > x", ">"), ("ls # it's\n$(id)", "$ ( )"),
                           ("echo x\\ #$(ls)", "$ ( )")):
        assert kesi.classify_command(command)[1].startswith(f"it contains shell expansions or redirections ({shown})")


def test_an_exact_rule_matches_only_that_command(settings, user):
    settings(project_rules={"allow": ["Bash(python -m pytest -q)"]})
    user()
    assert allowed("python -m pytest -q")
    assert not allowed("python -m pytest -q -x") and not allowed("python -m pytest")


def test_deny_rules_beat_modes_grants_and_allow_rules(settings, user, monkeypatch):
    settings(user={"allow": ["Bash(git push:*)"], "deny": ["Bash(git push:*)", "Edit(secrets/**)"]})
    asked = user("y")
    kesi.GRANTED_COMMANDS.add("git push origin main")
    for mode in kesi.PERMISSION_MODES:
        monkeypatch.setattr(kesi, "PERMISSION_MODE", mode)
        for command in ("git push origin main", "ls && git push", "env git push", "nohup git push -f"):
            ok, refusal = kesi.check_permission("run_command", {"command": command})
            assert not ok and "deny rule" in refusal, (mode, command)
        ok, refusal = kesi.check_permission("write_file", {"file_path": "Secrets/key.txt"})
        assert not ok and "deny rule" in refusal
    assert asked.asked == []


def test_hard_denials_stay_hard_whatever_the_rules(settings, user):
    settings(user={"allow": ["Bash(sudo id)", "Bash(rm -rf:*)"]})
    user("y")
    assert kesi.classify_command("sudo id")[0] == "deny"
    assert not allowed("sudo id") and not allowed("rm -rf ~")


def test_edit_rules_glob_the_workspace_path(settings, user):
    settings(user={"allow": ["Edit(src/**)", "Edit(docs/*.md)"]})
    asked = user()
    for path in ("src/a.py", "src/deep/b.py", "docs/x.md"):
        assert kesi.check_permission("write_file", {"file_path": path})[0], path
    assert asked.asked == []
    for path in ("srcx/a.py", "docs/sub/x.md", "SRC/a.py", "src/.envrc", "src/.vscode/tasks.json"):
        assert not kesi.check_permission("write_file", {"file_path": path})[0], path
    assert len(asked.asked) == 5        # files that run later ask even under an allow rule


def test_a_project_file_can_deny_but_not_allow(settings, user):
    settings(project={"allow": ["Bash(curl:*)", "Edit(**)"], "deny": ["Bash(make deploy)"]})
    asked = user()
    assert not allowed("curl https://example.com") and not kesi.check_permission("write_file", {"file_path": "a.py"})[0]
    assert len(asked.asked) == 2
    ok, refusal = kesi.check_permission("run_command", {"command": "make deploy"})
    assert not ok and ".kesi/settings.json" in refusal and len(asked.asked) == 2


def test_a_saves_the_shown_rule_for_this_project_in_the_user_settings(settings, user, ws):
    path = settings(user={})
    user("a", "a")
    assert allowed("make check")
    assert kesi.check_permission("write_file", {"file_path": "notes.md"})[0]
    saved = json.loads(path.read_text())
    assert saved["projects"][str(ws)]["allow"] == ["Bash(make check:*)", "Edit(notes.md)"]
    assert not (ws / ".kesi" / "settings.json").exists()
    kesi.GRANTED_COMMANDS.clear(), kesi.GRANTED_WRITES.clear()      # a new session
    later = user()
    assert allowed("make check") and kesi.check_permission("write_file", {"file_path": "notes.md"})[0]
    assert not allowed("make check && rm -rf x") and later.asked == ["run command: make check && rm -rf x"]


def test_permissions_lists_each_rule_with_its_source(settings, monkeypatch):
    settings(user={"allow": ["Bash(npm test:*)"], "deny": ["Nonsense"]},
             project_rules={"allow": ["Edit(src/**)"]}, project={"allow": ["Bash(curl:*)"], "deny": ["Edit(.ci/**)"]})
    shown = io.StringIO()
    monkeypatch.setattr(kesi, "UI", shown)
    kesi.show_permissions()
    text = shown.getvalue()
    assert "allow Bash(npm test:*)   from user settings" in text
    assert "deny  Nonsense   from user settings  (not understood: ignored)" in text
    assert "allow Edit(src/**)   from user settings, this project" in text
    assert "deny  Edit(.ci/**)   from .kesi/settings.json (deny only)" in text
    assert "1 allow rule(s) in .kesi/settings.json ignored" in text


@pytest.mark.parametrize("text", ['{"model": "claude-haiku-4-5", "projects": [] }', '{"model": "claude-haiku-4-5",',
                                  '{"projects": {"%s": {"allow": "Bash(ls:*)"}}}'], ids=["projects a list",
                                                                                         "half-edited", "allow a string"])
def test_a_rule_is_not_saved_over_settings_kesi_cannot_read(settings, ws, monkeypatch, text):
    """An "a" answer with a settings file KeSi does not understand: the rule holds for the session, the file stays."""
    path = settings(user={})
    path.write_text(text.replace("%s", str(ws)))
    monkeypatch.setattr(builtins, "input", lambda prompt="": "a")
    monkeypatch.setattr(kesi, "can_ask", lambda: True)
    monkeypatch.setattr(kesi, "UI", io.StringIO())
    assert allowed("make build")
    assert path.read_text() == text.replace("%s", str(ws))
    assert "could not save the rule" in kesi.UI.getvalue()
    monkeypatch.setattr(builtins, "input", lambda prompt="": pytest.fail("asked again"))
    assert allowed("make build")
