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

"""The Ironic event reader's process: ``python -m nova_drain_filters.event_reader``.

A scheduler process starts one (``ironic_view/reader.py``, which says
what it does; its code is ``ironic_view/reader_child.py``). This is only
its entry, so that ``ps`` names it and so that what must come before the
imports does. Ctrl-C in a terminal reaches the whole process group, and
the reader must end with its parent, not on its own with a traceback.
Eventlet's deprecation warning would land in the scheduler's stderr each
time a reader starts.
"""
import signal
import sys
import warnings


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    warnings.filterwarnings("ignore", message=r"\s*Eventlet is deprecated")
    from nova_drain_filters.ironic_view import reader_child
    return reader_child.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
