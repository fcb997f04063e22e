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

"""One act's screen: what it shows, what it checks, and the CLI it runs."""
from __future__ import annotations

import dataclasses
import shlex
from typing import Any

from tests.functional import cli_harness


@dataclasses.dataclass
class Screen:
    """The lines an act shows and the claims of it that did not hold."""

    number: int
    title: str
    verbose: bool = False
    lines: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    #: Service logs, shown with --verbose.
    logs: list[str] = dataclasses.field(default_factory=list)

    def say(self, text: str = "") -> None:
        """Add a line to the screen."""
        self.lines.append(text)

    def check(self, holds: object, claim: str) -> bool:
        """Record ``claim`` as broken unless ``holds``; return whether it held."""
        if not holds:
            self.problems.append(claim)
        return bool(holds)

    def text(self) -> str:
        """The whole screen, with the broken claims last."""
        return "\n".join([*self.lines, *(f"CHECK FAILED: {p}"
                                         for p in self.problems)])


class ActMixin:
    """For a harness case that is an act: ``self.screen`` and the CLI.

    The runner sets ``screen`` on the case before it runs (Nova's clean-up
    clears a case's attributes, ``nova/test.py`` ``_clear_attrs``, so the
    runner keeps its own reference); the suite gets a fresh one here.
    """

    screen: Screen
    NUMBER = 0
    TITLE = ""

    def setUp(self) -> None:
        if "screen" not in vars(self):
            self.screen = Screen(self.NUMBER, self.TITLE)
        super().setUp()  # type: ignore[misc]

    def openstack(self, *argv: str, show: bool = True) -> cli_harness.CliResult:
        """Run ``openstack *argv`` through the real shell; show it as typed.

        The command line is shown first, so a reader can copy it, then its
        output: stderr first (plans and notes, which a change prints before
        it acts), then stdout.
        """
        result = cli_harness.run_cli(self, list(argv))
        if show:
            self.screen.say(f"$ openstack {shlex.join(argv)}")
            for line in (result.stderr + result.stdout).splitlines():
                self.screen.say(line)
        self.screen.check(result.rc == 0, f"openstack {shlex.join(argv)} "
                          f"exited {result.rc}: {result.stderr.strip()}")
        self.screen.check("Traceback" not in result.stderr,
                          f"openstack {shlex.join(argv)} printed a traceback")
        return result

    def keep_logs(self) -> None:
        """With --verbose, keep the harness's captured service log."""
        stdlog: Any = getattr(self, "stdlog", None)
        if self.screen.verbose and stdlog is not None:
            self.screen.logs.append(stdlog.logger.output)
