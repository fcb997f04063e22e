"""Sphinx configuration for the nova-drain-filters operator docs."""
import os
import sys

# The options reference imports nova_drain_filters.conf.
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, ROOT)

project = "nova-drain-filters"
copyright = "nova-drain-filters developers"
extensions = ["oslo_config.sphinxext"]
master_doc = "index"
html_theme = "alabaster"
html_title = "nova-drain-filters"
