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

"""No import cycle in nova_drain_filters or osc_plugin, read from the source.

The graph has an edge for every ``import`` in a module, at the top, inside
a function or under ``TYPE_CHECKING``: a cycle through a late import is
still two modules that each need the other. Importing ``a.b.c`` runs
``a/__init__`` and ``a/b/__init__`` first, so the edge goes to those
packages too, except the importer's own packages, which are already being
imported when it runs. That is how ``request_filter`` importing
``filters.summary`` closed a cycle through ``filters/__init__``.
"""
import ast
import os
import pathlib
import tempfile

import testtools

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("nova_drain_filters", "osc_plugin")

Graph = dict[str, set[str]]


def modules(root: pathlib.Path, packages: tuple[str, ...]) -> dict[str, pathlib.Path]:
    """{dotted name: file} of every module under ``packages``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _targets(name: str, path: pathlib.Path, node: ast.AST,
             known: dict[str, pathlib.Path]) -> list[str]:
    """The modules of ours one import statement names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:
        package = name.split(".")
        if path.name != "__init__.py":
            package.pop()
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    found = []
    for alias in node.names:
        child = f"{base}.{alias.name}" if base else alias.name
        found.append(child if child in known else base)
    return found


def import_graph(root: pathlib.Path, packages: tuple[str, ...]) -> Graph:
    """{module: the modules of ours its imports run}."""
    known = modules(root, packages)
    graph: Graph = {name: set() for name in known}
    for name, path in known.items():
        own = {".".join(name.split(".")[:i])
               for i in range(1, name.count(".") + 2)}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _targets(name, path, node, known):
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    step = ".".join(parts[:i])
                    if step in known and step not in own:
                        graph[name].add(step)
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1 or node in graph[node]:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


class TestNoImportCycle(testtools.TestCase):
    def test_no_cycle_in_the_packages(self) -> None:
        graph = import_graph(ROOT, PACKAGES)
        self.assertEqual([], cycles(graph))

    def test_the_graph_sees_the_imports(self) -> None:
        # Guards the guard: an empty graph has no cycle either.
        graph = import_graph(ROOT, PACKAGES)
        self.assertIn("nova_drain_filters.ironic_view",
                      graph["nova_drain_filters.filters"])
        self.assertIn("nova_drain_filters.ironic_view.events",
                      graph["nova_drain_filters.ironic_view"])  # a late one
        self.assertIn("nova_drain_filters.ironic_view.snapshot",
                      graph["nova_drain_filters.ironic_view.events"])
        self.assertNotIn("nova_drain_filters.ironic_view",
                         graph["nova_drain_filters.ironic_view.events"])
        self.assertIn("nova_drain_filters.clients.compute",
                      graph["osc_plugin.client"])

    def test_a_cycle_through_a_package_init_is_found(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            files = {
                "pkg/__init__.py": "",
                "pkg/engine.py": "def f():\n    from pkg.top import note\n",
                "pkg/top/__init__.py": "from pkg import engine\n",
                "pkg/top/note.py": "import os\n",
                "pkg/sub/__init__.py": "from . import leaf\n",
                "pkg/sub/leaf.py": "from pkg.sub import other\n",
                "pkg/sub/other.py": "",
            }
            for name, text in files.items():
                os.makedirs(root / os.path.dirname(name), exist_ok=True)
                (root / name).write_text(text)
            graph = import_graph(root, ("pkg",))
        self.assertEqual([["pkg.engine", "pkg.top"]], cycles(graph))
        self.assertEqual({"pkg.sub.leaf"}, graph["pkg.sub"])
        self.assertEqual({"pkg.sub.other"}, graph["pkg.sub.leaf"])
