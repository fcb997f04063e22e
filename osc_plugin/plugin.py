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

"""The ``openstack drain`` plugin for python-openstackclient."""
import argparse
from typing import Any

from osc_lib import utils

from osc_plugin import client

API_NAME = "drain"
API_VERSION_OPTION = "os_drain_api_version"
DEFAULT_API_VERSION = "1"
API_VERSIONS = {"1": "osc_plugin.client.DrainClient"}


def make_client(instance: Any) -> client.DrainClient:
    """Build the client from the session openstackclient already has."""
    return client.DrainClient.from_client_manager(instance)


def build_option_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the plugin's global options."""
    parser.add_argument(
        "--os-drain-api-version", metavar="<drain-api-version>",
        default=utils.env("OS_DRAIN_API_VERSION", default=DEFAULT_API_VERSION),
        help="drain plugin API version (Env: OS_DRAIN_API_VERSION)")
    return parser
