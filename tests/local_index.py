"""Real wheels and a PEP 503 "simple" package index, for tests that install
packages with no network at all.

build_wheel writes a tiny demo package by hand. installed_wheels packs
distributions installed in the tests' own environment (pytest and what it
needs) back into wheels, so a sandboxed `uv run pytest` can download them
from a local server. simple_index lays wheels out as the pages an index
serves: /simple/<name>/ links to /files/<wheel>#sha256=<digest>.
"""
import base64
import hashlib
import html
import importlib.metadata
import re
import zipfile
from pathlib import Path

from packaging.requirements import Requirement


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheel(folder: Path, name: str, version: str, files: dict[str, bytes], tag: str = "py3-none-any",
                metadata: bytes | None = None, wheel: bytes | None = None) -> Path:
    """A wheel of files (paths inside site-packages), with its dist-info: METADATA,
    WHEEL and a RECORD that lists every file with its hash."""
    stem = f"{normal_name(name).replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {**files,
             f"{info}/METADATA": metadata or f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{info}/WHEEL": wheel or (f"Wheel-Version: 1.0\nGenerator: kesi-test\nRoot-Is-Purelib: true\n"
                                        f"Tag: {tag}\n").encode()}
    record = "".join(f"{path},{record_hash(data)},{len(data)}\n" for path, data in files.items())
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in files.items():
            archive.writestr(member, data)
    return path


def build_wheel(folder: Path, name: str = "kesidemo", version: str = "1.0") -> Path:
    """A minimal pure-Python package: `import kesidemo; kesidemo.ANSWER == 42`."""
    return write_wheel(folder, name, version, {f"{name}/__init__.py": b"ANSWER = 42\n"})


# dist-info files not copied: the installer's own, and those write_wheel writes.
NOT_COPIED = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD", "METADATA", "WHEEL"}


def installed_wheel(folder: Path, name: str) -> Path:
    """The installed distribution name as a wheel again: its files as installed
    (without bytecode, and without console scripts, which the installer makes
    again from entry_points.txt), and its own METADATA and WHEEL."""
    dist = importlib.metadata.distribution(name)
    wheel_file = dist.read_text("WHEEL") or ""
    if "Root-Is-Purelib: true" not in wheel_file:
        raise ValueError(f"{name} is not a pure-Python wheel; cannot pack it again")
    tags = [tag.split("-") for tag in re.findall(r"^Tag: (\S+)$", wheel_file, re.MULTILINE)]
    tag = "-".join(".".join(dict.fromkeys(t[part] for t in tags)) for part in range(3))   # py2.py3-none-any
    installed_info = next(p.parts[0] for p in dist.files if p.name == "METADATA" and len(p.parts) == 2)
    info = f"{normal_name(dist.name).replace('-', '_')}-{dist.version}.dist-info"    # as write_wheel names it
    files = {}
    for path in dist.files:
        parts = path.parts
        if parts[0] == ".." or "__pycache__" in parts or path.suffix == ".pyc":
            continue
        if parts[0] == installed_info:
            if parts[-1] in NOT_COPIED:
                continue
            parts = (info, *parts[1:])
        files["/".join(parts)] = Path(dist.locate_file(path)).read_bytes()
    return write_wheel(folder, dist.name, dist.version, files, tag,
                       metadata=dist.read_text("METADATA").encode(), wheel=wheel_file.encode())


def installed_wheels(folder: Path, *names: str) -> list[Path]:
    """Wheels of names and everything they need here (their requirements whose
    markers hold for this interpreter, extras left out), from what is installed."""
    wheels, seen, todo = [], set(), list(names)
    while todo:
        name = normal_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        wheels.append(installed_wheel(folder, name))
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return wheels


def normal_name(name: str) -> str:
    """PEP 503: Foo.Bar_baz -> foo-bar-baz."""
    return re.sub(r"[-_.]+", "-", name).lower()


def simple_index(wheels: list[Path]) -> dict[str, bytes]:
    """URL path -> body: a /simple/<name>/ page per project, and the wheels."""
    pages: dict[str, list[str]] = {}
    files = {}
    for wheel in wheels:
        data = wheel.read_bytes()
        files[f"/files/{wheel.name}"] = data
        digest = hashlib.sha256(data).hexdigest()
        link = f'<a href="/files/{html.escape(wheel.name)}#sha256={digest}">{html.escape(wheel.name)}</a><br>'
        pages.setdefault(normal_name(wheel.name.split("-")[0]), []).append(link)
    for project, links in pages.items():
        files[f"/simple/{project}/"] = ("<!DOCTYPE html><html><body>\n" + "\n".join(links)
                                        + "\n</body></html>\n").encode()
    return files
