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

"""Sphinx configuration for the nova-drain-filters operator docs."""
import os
import sys

# The options reference imports nova_drain_filters.conf.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

project = "nova-drain-filters"
copyright = "nova-drain-filters developers"
# sphinx.ext.graphviz draws the drain phase diagram (drain.rst) from its
# text; it runs Graphviz's ``dot``, a system package (see requirements.txt).
# cliff.sphinxext writes the CLI reference (cli.rst) from the commands'
# own parsers: their docstrings and help strings are the reference.
extensions = ["oslo_config.sphinxext", "sphinx.ext.graphviz",
              "cliff.sphinxext"]
graphviz_output_format = "svg"

# The commands are ``openstack drain ...``; every one of them is ours, so
# the epilog "This command is provided by the nova-drain-filters plugin"
# would only repeat itself.
autoprogram_cliff_application = "openstack"
autoprogram_cliff_app_dist_name = "nova-drain-filters"
# cliff's output formatter options (-f, -c, --max-width ...) are the same
# on every list; cli.rst says so once instead of on every command.
autoprogram_cliff_ignored = [
    "--help", "--format", "--column", "--quote", "--noindent",
    "--max-width", "--fit-width", "--print-empty", "--sort-column",
    "--sort-ascending", "--sort-descending"]

# Option names are literal text: keep "--" as two hyphens, never a dash.
smartquotes_action = "qe"
master_doc = "index"
html_theme = "alabaster"
html_title = "nova-drain-filters"
