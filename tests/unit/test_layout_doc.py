# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""doc/source/contributor/layout.rst against the code, read from the source.

Every module of ``nova_drain_filters`` and ``osc_plugin`` has an entry (a
package ``__init__.py`` with nothing but a docstring needs none), and each
entry's "Imports" sentence names exactly the modules of ours its files
import: at the top, inside a function or under ``TYPE_CHECKING``, as
``test_import_cycles`` reads them. An entry is a definition-list term of
``file.py`` names, under a section heading that names its package
(``Clients: ``nova_drain_filters/clients````) or a package entry
(``ironic_view/``); a name in the sentence is a module of the file's own
package or of one above it, else of ``nova_drain_filters``. The layout page
says the same for a contributor.
"""
import ast
import dataclasses
import pathlib
import re

import testtools

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("nova_drain_filters", "osc_plugin")
LAYOUT = "doc/source/contributor/layout.rst"
FALLBACK = "nova_drain_filters"

_LITERAL = re.compile(r"``([^`]+)``")
_IMPORTS = re.compile(r"\bImports?\b(.*?)(?:[.;](?=\s|$))")
_UNDERLINE = re.compile(r"^([=\-~^\"'*+#])\1+$")


def modules(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """{dotted name: file} of every module under PACKAGES."""
    found = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_marker(path: pathlib.Path) -> bool:
    """A package ``__init__.py`` with nothing but a docstring."""
    if path.name != "__init__.py":
        return False
    body = ast.parse(path.read_text()).body
    return all(isinstance(node, ast.Expr)
               and isinstance(node.value, ast.Constant) for node in body)


def _package(name: str, path: pathlib.Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports(name: str, path: pathlib.Path,
            known: dict[str, pathlib.Path]) -> set[str]:
    """The modules of ours ``name`` imports, each at its deepest."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package(name, path).split(".")
                package = package[:len(package) - (node.level - 1)]
                base = ".".join(package + ([base] if base else []))
            targets = [f"{base}.{alias.name}"
                       if f"{base}.{alias.name}" in known else base
                       for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def resolve(word: str, package: str, known: dict[str, pathlib.Path]
            ) -> str | None:
    """The module ``word`` names from ``package``, as the page says."""
    parts = package.split(".")
    for i in range(len(parts), -1, -1):
        candidate = ".".join(parts[:i] + [word])
        if candidate in known:
            return candidate
    candidate = f"{FALLBACK}.{word}"
    return candidate if candidate in known else None


def short_name(target: str, package: str,
               known: dict[str, pathlib.Path]) -> str:
    """The shortest name that ``resolve`` turns back into ``target``."""
    parts = target.split(".")
    for i in range(len(parts) - 1, -1, -1):
        word = ".".join(parts[i:])
        if resolve(word, package, known) == target:
            return word
    return target


def _covers(listed: str, target: str) -> bool:
    return target == listed or (listed.count(".") > 0
                                and target.startswith(listed + "."))


@dataclasses.dataclass
class Entry:
    line: int
    files: list[str]
    names: list[str] | None   # None: the entry has no "Imports" sentence


def entries(text: str) -> list[Entry]:
    """Every definition-list term of the page that names a file or package.

    A term is a line starting with a literal whose next line is indented
    deeper; its body runs to the next line as shallow as the term, or to
    the next term. A term's literals ending in ``.py`` or ``/`` are paths
    under the section heading's literal, or the enclosing package term's.
    """
    lines = text.splitlines()
    found = []
    base = ""
    parents: list[tuple[int, str]] = []   # (indent, dir) of package terms

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    def is_term(i: int) -> bool:
        line = lines[i]
        if not line.strip().startswith("``") or i + 1 >= len(lines):
            return False
        nxt = lines[i + 1]
        return bool(nxt.strip()) and indent(nxt) > indent(line)

    for i, line in enumerate(lines):
        if i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]) \
                and line.strip() and not _UNDERLINE.match(line):
            literal = _LITERAL.findall(line)
            base = literal[0].rstrip("/") + "/" if literal else ""
            parents = []
            continue
        if not is_term(i):
            continue
        depth = indent(line)
        parents = [(d, p) for d, p in parents if d < depth]
        here = parents[-1][1] if parents else base
        paths = [w for w in _LITERAL.findall(line)
                 if w.endswith(".py") or w.endswith("/")]
        if not paths:
            continue
        body = []
        for j in range(i + 1, len(lines)):
            if lines[j].strip() and (indent(lines[j]) <= depth
                                     or is_term(j)):
                break
            body.append(lines[j].strip())
        files = []
        for word in paths:
            full = word if (ROOT / word).exists() \
                and not (ROOT / (here + word)).exists() else here + word
            if word.endswith("/"):
                parents.append((depth, full))
            else:
                files.append(full)
        if not files:
            continue
        match = _IMPORTS.search(" ".join(body))
        names = _LITERAL.findall(match.group(1)) if match else None
        found.append(Entry(i + 1, files, names))
    return found


def problems(root: pathlib.Path, text: str) -> list[str]:
    """What layout.rst gets wrong about the code, each with its fix."""
    known = modules(root)
    by_path = {str(p.relative_to(root)): n for n, p in known.items()}
    out = []
    described = set()
    for entry in entries(text):
        where = f"{LAYOUT} line {entry.line}"
        names = [by_path.get(f) for f in entry.files]
        for f, name in zip(entry.files, names, strict=True):
            if name is None:
                out.append(f"{where}: ``{f}`` is no module of ours; "
                           "fix the path or remove the entry")
        members = [n for n in names if n is not None]
        if not members:
            continue
        described.update(members)
        if entry.names is None:
            out.append(f"{where}: the entry has no 'Imports' sentence; "
                       "end it with 'Imports nothing of ours.' or "
                       "'Imports ``a``, ``b``.'")
            continue
        package = _package(members[0], known[members[0]])
        named = {}
        for word in entry.names:
            target = resolve(word, package, known)
            if target is None:
                out.append(f"{where}: 'Imports' names ``{word}``, no "
                           "module of ours; use a module's dotted name")
            else:
                named[word] = target
        listed = list(named.values())
        imported: set[str] = set()
        for name in members:
            for target in sorted(imports(name, known[name], known)):
                imported.add(target)
                if not any(_covers(item, target) for item in listed):
                    word = short_name(target, package, known)
                    out.append(
                        f"{where}: {known[name].relative_to(root)} imports "
                        f"{target}; add ``{word}`` to the entry's "
                        "'Imports' sentence")
        for word, target in named.items():
            if not any(_covers(target, t) for t in imported):
                out.append(f"{where}: 'Imports' names ``{word}`` "
                           f"({target}), which no file of the entry "
                           "imports; remove it")
    for name, path in sorted(known.items()):
        if name in described or _is_marker(path):
            continue
        package = _package(name, path)
        words = [short_name(t, package, known)
                 for t in sorted(imports(name, path, known))]
        says = ("Imports " + ", ".join(f"``{w}``" for w in words)
                if words else "Imports nothing of ours")
        out.append(
            f"{path.relative_to(root)} has no entry in {LAYOUT}; add one "
            "in its layer's section, under its package's heading:\n"
            f"``{path.relative_to(root)}``\n"
            f"    What it is, in a sentence. {says}.")
    return out


class TestLayoutDoc(testtools.TestCase):
    def test_layout_matches_the_code(self) -> None:
        found = problems(ROOT, (ROOT / LAYOUT).read_text())
        self.assertEqual([], found, "\n" + "\n".join(found))

    def test_the_page_is_read(self) -> None:
        # Guards the guard: a page read as no entries has no problem either.
        read = {f: e for e in entries((ROOT / LAYOUT).read_text())
                for f in e.files}
        self.assertEqual(["consumer", "node_table", "notifications"],
                         read["nova_drain_filters/ironic_view/wire.py"].names)
        self.assertEqual(
            [], read["nova_drain_filters/ironic_view/refresher.py"].names)
        self.assertIn("osc_plugin/v1/host.py", read)

    def test_a_missing_entry_and_import_are_named(self) -> None:
        page = (ROOT / LAYOUT).read_text()
        page = page.replace("``consumer``, ``node_table``, ``notifications``",
                            "``consumer``, ``notifications``, ``decisions``")
        page = page.replace("``v1/host.py``", "``v1/hosts.py``")
        found = "\n".join(problems(ROOT, page))
        self.assertIn("imports nova_drain_filters.ironic_view.node_table; "
                      "add ``node_table``", found)
        self.assertIn("names ``decisions`` (nova_drain_filters.decisions)",
                      found)
        self.assertIn("osc_plugin/v1/host.py has no entry", found)
        self.assertIn("``osc_plugin/v1/hosts.py`` is no module of ours",
                      found)
