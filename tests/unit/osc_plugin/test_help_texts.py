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

"""The commands' help is the CLI reference (doc/source/cli.rst).

cliff.sphinxext builds each command as ``cls(None, None)`` and documents
its parser: the class docstring, then every option's help. These tests keep
that reference complete, and keep options off commands that ignore them.
"""
import argparse
import importlib.metadata
import inspect
from typing import Any

import testtools

NAMESPACE = "openstack.drain.v1"
#: The commands whose plan is checked against a disruption budget.
BUDGETED = {"drain stale clear", "drain orphan clear"}


def _commands() -> dict[str, Any]:
    """Every command of our entry point namespace, by its command words."""
    eps = importlib.metadata.entry_points(group=NAMESPACE)
    return {ep.name.replace("_", " "): ep.load() for ep in eps}


def _parser(name: str, cls: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = cls(None, None).get_parser(
        f"openstack {name}")
    return parser


class TestHelpTexts(testtools.TestCase):
    def test_every_command_is_documented(self) -> None:
        commands = _commands()
        self.assertEqual(16, len(commands), sorted(commands))
        for name, cls in commands.items():
            doc = inspect.getdoc(cls) or ""
            lines = doc.splitlines()
            # The first line is the summary 'openstack help' lists.
            self.assertTrue(lines and lines[0].endswith("."), name)
            self.assertLessEqual(len(lines[0]), 79, name)
            if len(lines) > 1:
                self.assertEqual("", lines[1], name)
            for action in _parser(name, cls)._actions:
                self.assertTrue(action.help, f"{name}: {action.dest}")

    def test_max_fraction_only_where_a_budget_applies(self) -> None:
        for name, cls in _commands().items():
            options = {o for a in _parser(name, cls)._actions
                       for o in a.option_strings}
            self.assertEqual(name in BUDGETED, "--max-fraction" in options,
                             name)
