# /// script
# requires-python = ">=3.11"
# dependencies = ["anthropic>=2.16,<3", "pyyaml", "jinja2"]
# ///
"""Extract other agents' fixed prefix (tool specs and rules) into prefix_sources/ for prefix.py.

Each source is read from a bare git clone (`git --git-dir=DIR show HEAD:path`)
and written with its repository, commit, path and licence:
  kaochenlong/KeSi          kesi.py: TOOLS (no system prompt is sent)       MIT: text stored
  SWE-agent/mini-swe-agent  config/mini.yaml: system + instance template
                            (rendered by jinja2 for a sample Linux, empty task), the
                            bash tool in the Anthropic form litellm sends   MIT: text stored
  1rgs/nanocode             nanocode.py: TOOLS via its make_schema, system  no licence file: only
                                                                            the character counts
No code from these repositories is run: literals are read with ast.

Run: uv run examples/bench/prefix_extract.py --kesi DIR --mini DIR --nanocode DIR
"""
import argparse
import ast
import json
import subprocess

import jinja2
import yaml

from benchlib import HERE, kesi

OUT = HERE / "prefix_sources"
SAMPLE_CWD = "/home/user/project"
LITERAL_NODES = (ast.Constant, ast.List, ast.Dict, ast.Tuple, ast.JoinedStr, ast.FormattedValue, ast.Name,
                 ast.Load, ast.expr_context)


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True,
                          text=True).stdout


def source(git_dir: str, repo: str, path: str, licence: str) -> dict:
    return {"repository": f"github.com/{repo}", "commit": git(git_dir, "rev-parse", "HEAD").strip(),
            "path": path, "licence": licence}


def literal(tree: ast.Module, name: str, names: dict):
    """The value assigned to a top-level name; other names resolve through `names`."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            assert all(isinstance(n, LITERAL_NODES) for n in ast.walk(node.value)), f"{name} is not a literal"
            return eval(compile(ast.Expression(node.value), name, "eval"), {"__builtins__": {}}, names)
    raise LookupError(name)


def author_kesi(git_dir: str) -> dict:
    tree = ast.parse(git(git_dir, "show", "HEAD:kesi.py"))
    timeout = literal(tree, "COMMAND_TIMEOUT", {})
    return {**source(git_dir, "kaochenlong/KeSi", "kesi.py", "MIT, (c) 2026 Eddie Kao"),
            "tools": literal(tree, "TOOLS", {"COMMAND_TIMEOUT": timeout}), "system": []}


def mini_swe_agent(git_dir: str) -> dict:
    config = yaml.safe_load(git(git_dir, "show", "HEAD:src/minisweagent/config/mini.yaml"))["agent"]
    values = {"system": "Linux", "release": "6.8.0", "version": "#1 SMP", "machine": "x86_64", "task": ""}

    def render(text: str) -> str:
        return jinja2.Template(text, undefined=jinja2.StrictUndefined).render(**values)
    tree = ast.parse(git(git_dir, "show", "HEAD:src/minisweagent/models/utils/actions_toolcall.py"))
    function = literal(tree, "BASH_TOOL", {})["function"]
    tool = {"name": function["name"], "description": function["description"],
            "input_schema": function["parameters"]}
    return {**source(git_dir, "SWE-agent/mini-swe-agent", "src/minisweagent/config/mini.yaml, "
                     "src/minisweagent/models/utils/actions_toolcall.py",
                     "MIT, (c) 2025 Kilian A. Lieret and Carlos E. Jimenez"),
            "tools": [tool], "system": [render(config["system_template"]), render(config["instance_template"])],
            "note": "the instance template is the first user message, the task left empty"}


def nanocode(git_dir: str) -> dict:
    text = git(git_dir, "show", "HEAD:nanocode.py")
    table = literal(ast.parse(text), "TOOLS", {"read": None, "write": None, "edit": None, "glob": None,
                                              "grep": None, "bash": None})
    tools = []
    for name, (description, params, _) in table.items():   # as its make_schema builds them
        properties = {p: {"type": "integer" if t.rstrip("?") == "number" else t.rstrip("?")}
                      for p, t in params.items()}
        tools.append({"name": name, "description": description, "input_schema": {
            "type": "object", "properties": properties,
            "required": [p for p, t in params.items() if not t.endswith("?")]}})
    system = f"Concise coding assistant. cwd: {SAMPLE_CWD}"
    assert 'system_prompt = f"Concise coding assistant. cwd: {os.getcwd()}"' in text
    return {**source(git_dir, "1rgs/nanocode", "nanocode.py", "none found (no LICENSE file)"),
            "tool_count": len(tools), "tools_chars": kesi.json_chars(tools), "system_chars": len(system),
            "note": "counts only: without a licence the text is not copied here"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("kesi", "mini", "nanocode"):
        parser.add_argument(f"--{name}", required=True, help="a bare git clone")
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    for filename, extract, git_dir in [("kaochenlong-KeSi.json", author_kesi, args.kesi),
                                       ("mini-swe-agent.json", mini_swe_agent, args.mini),
                                       ("nanocode.json", nanocode, args.nanocode)]:
        (OUT / filename).write_text(json.dumps(extract(git_dir), indent=1, ensure_ascii=False) + "\n",
                                    encoding="utf-8")
        print(f"wrote {OUT / filename}")


if __name__ == "__main__":
    main()
