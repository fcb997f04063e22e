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

"""The test tree's own rules, read from the source with ``ast``.

Tests share bases and fakes through helper modules, never by importing
another test module (its cases would be collected twice, and a change to
one test file would break unrelated ones). Benchmarks and demo acts under
``tests/functional/bench/`` and ``demo/`` are harness code, not tests: the
test runner must not collect them, so no test module imports a benchmark
and neither package holds a file the runner's ``test*.py`` pattern
matches. Nothing in ``tests/`` or ``tools/`` edits ``sys.path`` or imports
from ``tools/``.
"""
import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

import testtools

ROOT = Path(__file__).resolve().parents[2]
#: unittest's discovery pattern, which stestr (``.stestr.conf``) uses.
PATTERN = "test*.py"
HARNESS_CODE = ("tests.functional.bench", "tests.functional.demo")


def dotted(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def sources(*folders: str) -> Iterator[tuple[Path, ast.Module]]:
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*.py")):
            yield path, ast.parse(path.read_text(), str(path))


def imports(path: Path, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """Every module name an import in ``tree`` may load, absolute.

    ``from a import b`` yields both ``a`` and ``a.b`` (``b`` may be a
    module); relative imports are resolved against ``path``'s package.
    """
    package = dotted(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield node.lineno, module
            for alias in node.names:
                yield node.lineno, f"{module}.{alias.name}"


def sys_path_uses(tree: ast.Module) -> list[int]:
    """The lines that read or change ``sys.path``."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "path"
            and isinstance(node.value, ast.Name) and node.value.id == "sys"]


def is_test_module(name: str) -> bool:
    """Whether ``name`` is a module the test runner collects."""
    path = ROOT.joinpath(*name.split(".")).with_suffix(".py")
    return path.is_file() and fnmatch.fnmatch(path.name, PATTERN)


class TestTestsLayout(testtools.TestCase):
    def test_no_test_module_imports_another(self) -> None:
        found = [f"{dotted(path)}:{line} imports {name}"
                 for path, tree in sources("tests")
                 for line, name in imports(path, tree)
                 if is_test_module(name) and name != dotted(path)]
        self.assertEqual([], found)

    def test_nothing_imports_tools(self) -> None:
        found = [f"{dotted(path)}:{line} imports {name}"
                 for path, tree in sources("tests", "tools", "nova_drain_filters",
                                           "osc_plugin")
                 for line, name in imports(path, tree)
                 if name.split(".")[0] == "tools"]
        self.assertEqual([], found)

    def test_no_sys_path_edits(self) -> None:
        found = [f"{dotted(path)}:{line}"
                 for path, tree in sources("tests", "tools")
                 for line in sys_path_uses(tree)]
        self.assertEqual([], found)

    def test_harness_code_is_not_collected(self) -> None:
        collected = [dotted(path) for path, _tree in sources(
            "tests/functional/bench", "tests/functional/demo")
            if fnmatch.fnmatch(path.name, PATTERN)]
        self.assertEqual([], collected)
        # The demo's own test runs the acts; nothing imports a benchmark.
        found = [f"{dotted(path)}:{line} imports {name}"
                 for path, tree in sources("tests")
                 if fnmatch.fnmatch(path.name, PATTERN)
                 for line, name in imports(path, tree)
                 if name.startswith(HARNESS_CODE[0])]
        self.assertEqual([], found)

    def test_the_rules_see_a_breach(self) -> None:
        # The checks above pass on an empty list too; show they can fail.
        tree = ast.parse("from tests.unit import test_conf\n"
                         "from .fakes import FakeClock\nimport sys\n"
                         "sys.path.insert(0, 'tools')\n")
        path = ROOT / "tests" / "unit" / "clients" / "test_x.py"
        names = [name for _line, name in imports(path, tree)]
        self.assertIn("tests.unit.clients.fakes.FakeClock", names)
        self.assertEqual(["tests.unit.test_conf"],
                         [n for n in names if is_test_module(n)])
        self.assertFalse(is_test_module("tests.unit.fakes"))
        self.assertEqual([4], sys_path_uses(tree))
