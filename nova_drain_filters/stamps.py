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

"""Time stamps as OpenStack services write them, read as epoch seconds."""
import datetime
from typing import Any


def epoch(text: Any) -> float | None:
    """An ISO 8601 stamp as seconds since the epoch; None if it is none.

    Naive means UTC: Nova's API (``created_at``, ``updated_at``) and
    oslo.messaging's notifier (``str(timeutils.utcnow())``) both write
    UTC without a zone. A ``T`` or a space between date and time, with or
    without microseconds or a zone (``Z`` too, which Python 3.10 reads
    only as ``+00:00``).
    """
    if not isinstance(text, str):
        return None
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp()
