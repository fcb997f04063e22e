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


"""nova-drain-agent as an operator installs it: from the wheel.

The wheel is built from the working tree, installed with no dependencies
into a new, empty venv whose dependencies (Nova among them) come from the
project's own venv by a ``.pth`` line, as a package installed beside Nova
would find them. The console script and the config generator run from
that venv and must import the wheel's code, not the working tree's.
"""
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import fixtures
import testtools

from tests.functional.services import process

#: What the wheel is built from (pbr reads no git with PBR_VERSION set).
SOURCES = ("setup.py", "setup.cfg", "pyproject.toml", "README.md",
           "LICENSE", "requirements.txt", "nova_drain_filters",
           "osc_plugin")


class WheelTest(testtools.TestCase):
    def run_ok(self, *argv: str | Path, timeout: float = 300) -> str:
        env = process.child_env({"PBR_VERSION": "0.0.1"})
        env.pop("PYTHONPATH", None)  # nothing of the working tree
        done = subprocess.run(
            [str(a) for a in argv], capture_output=True, text=True,
            timeout=timeout, cwd=self.tmp, env=env)
        self.assertEqual(0, done.returncode,
                         f"{argv}: {done.stdout[-3000:]}{done.stderr[-3000:]}")
        return done.stdout + done.stderr

    def setUp(self) -> None:
        super().setUp()
        self.tmp = Path(self.useFixture(fixtures.TempDir()).path)
        src = self.tmp / "src"
        src.mkdir()
        for name in SOURCES:
            path = process.REPO_ROOT / name
            if path.is_dir():
                shutil.copytree(path, src / name, ignore=shutil.ignore_patterns(
                    "__pycache__", "*.pyc"))
            else:
                shutil.copy(path, src / name)
        # pbr's backend and a setuptools that makes wheels, in uv's
        # isolated build environment (tools/setup.sh installed uv).
        uv = process.REPO_ROOT / ".venv-uv" / "bin" / "uv"
        if not uv.exists():
            self.skipTest(f"no {uv}: run tools/setup.sh")
        self.run_ok(uv, "build", "--wheel", "--out-dir", self.tmp / "dist",
                    src)
        pip = [sys.executable, "-m", "pip"]
        self.wheel = next((self.tmp / "dist").glob("nova_drain_filters-*.whl"))
        venv = self.tmp / "venv"
        self.run_ok(sys.executable, "-m", "venv", "--without-pip", venv)
        self.bin = venv / "bin"
        self.run_ok(*pip, "--python", self.bin / "python", "install",
                    "--no-deps", "--no-index", self.wheel)
        site = Path(self.run_ok(
            self.bin / "python", "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])"
        ).strip().splitlines()[-1])
        (site / "beside_nova.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n")
        self.site = site

    def test_help_and_config_generator_from_the_wheel(self) -> None:
        where = self.run_ok(self.bin / "python", "-c",
                            "import nova, nova_drain_filters.agent.service as s;"
                            " print(s.__file__)")
        self.assertIn(str(self.site), where)
        out = self.run_ok(self.bin / "nova-drain-agent", "--help")
        self.assertIn("usage: nova-drain-agent", out)
        self.assertIn("--config-file", out)
        sample = self.tmp / "sample.conf"
        self.run_ok(self.bin / "python", "-m", "oslo_config.generator",
                    "--namespace", "nova_drain_filters",
                    "--output-file", sample)
        text = sample.read_text()
        for line in ("[drain_filters]", "[drain_agent]",
                     "#reconcile_interval = 60", "#pool = nova-drain-agent"):
            self.assertIn(line, text)
