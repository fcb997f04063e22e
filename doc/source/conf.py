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
extensions = ["oslo_config.sphinxext", "sphinx.ext.graphviz"]
graphviz_output_format = "svg"
master_doc = "index"
html_theme = "alabaster"
html_title = "nova-drain-filters"
