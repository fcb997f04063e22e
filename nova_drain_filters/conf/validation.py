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

"""Every option held to its own declaration, at scheduler start-up."""
import difflib
import glob
import math
import os
from collections.abc import Iterable
from typing import Any

from oslo_config import cfg
from oslo_config import types


class ConfigError(ValueError):
    """A ``[drain_filters]`` option has a value the filters cannot use."""


#: The largest number accepted for an option that declares no ``max``. No
#: interval, age or count these options hold makes sense above it (68 years
#: of seconds), and larger ones overflow what they feed: ``Event.wait`` and
#: ``datetime.timedelta`` raise ``OverflowError``, Ironic's ``limit`` is an
#: integer column.
NUMBER_CEILING = 2**31 - 1


def _problem(exc: Exception) -> str:
    """The part of an oslo.config error that says what is wrong, on one line.

    oslo.config words a bad file value as "Value for option X from
    LocationInfo(...) is not valid: <what>" (``ConfigOpts._do_get`` in
    ``oslo_config/cfg.py``); the operator needs only <what>.
    """
    text = str(exc)
    marker = " is not valid: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return " ".join(text.split())


def check_value(opt: cfg.Opt, value: Any) -> str | None:
    """What is wrong with an option's value, or None; driven by its type.

    oslo.config reads an empty number as None. None is accepted only where
    the declaration says it means something (``default=None``); an empty
    string only where the default is empty too. A list may be empty. The
    type's own rules (bounds, choices, regex) are applied again, so a value
    that did not come through the type (an override from code, a conf-like
    object) is held to them as well; a number must also be finite and, with
    no declared ``max``, at most NUMBER_CEILING.
    """
    opt_type = opt.type
    if value is None:
        if opt.default is None:
            return None
        return (f"empty value; give one, or remove the line to get the "
                f"default ({opt.default})")
    if isinstance(opt_type, types.List):
        for item in value:
            try:
                opt_type.item_type(item)
            except (TypeError, ValueError) as exc:
                return _problem(exc)
        return None
    if value == "" and opt.default != "":
        default = "unset" if opt.default is None else opt.default
        return (f"empty value; give one, or remove the line to get the "
                f"default ({default})")
    if isinstance(opt_type, (types.Number, types.String, types.Boolean)):
        try:
            opt_type(value)
        except (TypeError, ValueError) as exc:
            return f"{value!r}: {_problem(exc)}"
    if isinstance(opt_type, types.Number) and not isinstance(value, bool):
        if isinstance(value, float) and not math.isfinite(value):
            return f"{value!r} is not a finite number"
        if opt_type.max is None and abs(value) > NUMBER_CEILING:
            return f"{value!r} is too large (at most {NUMBER_CEILING})"
    return None


def validate(conf: cfg.ConfigOpts, group_name: str,
             opts: Iterable[cfg.Opt]) -> None:
    """Read every option once and raise ConfigError naming a bad one.

    oslo.config checks types and bounds only when a value is read, and takes
    an empty number for None. Reading them all here, when Nova loads the
    filters (``filters.all_filters``), makes a bad value stop
    ``nova-scheduler`` at start-up with one line naming the option, instead
    of failing every request later. Every option ``list_opts`` returns is
    checked by its declaration (``check_value``), so a new option needs no
    code here.
    """
    group = getattr(conf, group_name)
    for opt in opts:
        try:
            value = getattr(group, opt.dest)
        except ValueError as exc:  # ConfigFileValueError is one
            raise ConfigError(f"[{group_name}] {opt.dest}: {_problem(exc)}") from None
        problem = check_value(opt, value)
        if problem is not None:
            raise ConfigError(f"[{group_name}] {opt.dest}: {problem}")


def unknown_options(conf: cfg.ConfigOpts, group_name: str,
                    opts: Iterable[cfg.Opt]) -> dict[str, str | None]:
    """The names in the group's section of the files ``conf`` read that
    are none of ``opts`` (nor a deprecated name of one), each with the
    closest known name, or None.

    oslo.config ignores a name it does not know, so a misspelled option
    reads as its default: a protection left off, with nothing said.
    The files are read again here, as oslo.config read them
    (``cfg.ConfigParser``): ``config_file`` and ``config_dir``'s
    ``*.conf``. A file that cannot be read is skipped: oslo.config
    already said so when it could not.
    """
    known: set[str] = set()
    for opt in opts:
        known.update((opt.dest, opt.name.replace("-", "_")))
        for old in opt.deprecated_opts:
            if old.name and old.group in (None, group_name):
                known.add(old.name.replace("-", "_"))
    found: dict[str, str | None] = {}
    for path in _config_files(conf):
        sections: dict[str, dict[str, list[str]]] = {}
        try:
            cfg.ConfigParser(path, sections).parse()
        except (OSError, cfg.ParseError):
            continue
        for section, values in sections.items():
            if section.lower() != group_name.lower():
                continue
            for name in values:
                key = name.replace("-", "_")
                if key not in known:
                    close = difflib.get_close_matches(key, sorted(known), 1)
                    found.setdefault(name, close[0] if close else None)
    return found


def _config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The files oslo.config read for ``conf``, in its order."""
    files: list[str] = []
    for name in ("config_file", "config_dir"):
        try:
            value = conf[name]
        except (cfg.NoSuchOptError, KeyError):
            continue
        for entry in ([value] if isinstance(value, str) else value or []):
            if name == "config_dir":
                files.extend(sorted(glob.glob(os.path.join(entry, "*.conf"))))
            else:
                files.append(entry)
    return files
