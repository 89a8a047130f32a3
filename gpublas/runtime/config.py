"""gpublas' environment variables, each checked where it is read: a value gpublas cannot use raises
ConfigError, one line naming the variable, its value and what is allowed, and an uncaught
ConfigError prints as that one line (no traceback through gpublas' internals), exit status 1.

    order = config.choice("GPUBLAS_SIM_ORDER", ("forward", "reverse", "random"), "forward")
    size = config.integer("GPUBLAS_SIM_MEMORY", default, "bytes")      # GPUBLAS_SIM_MEMORY=1G: refused
    on = config.flag("GPUBLAS_SIM_MEMCHECK", False)
"""
import os
import re
import shutil
import sys

from .errors import ConfigError

FLAGS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _raw(name):
    value = os.environ.get(name)
    return None if value is None or not value.strip() else value.strip()


def choice(name, allowed, default):
    """One of `allowed` (case-insensitive), `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() not in allowed:
        raise ConfigError(f"{name}={value!r}: expected {' or '.join(allowed)}")
    return value.lower()


def integer(name, default, what, minimum=0):
    """A whole number >= minimum, `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise ConfigError(f"{name}={value!r}: expected a whole number of {what} (at least {minimum}), "
                          f"e.g. {name}={max(default, minimum)}")
    return number


def flag(name, default):
    """On or off (1/0, true/false, yes/no, on/off), `default` when unset."""
    value = _raw(name)
    if value is None:
        return default
    if value.lower() not in FLAGS:
        raise ConfigError(f"{name}={value!r}: expected 1 or 0 (or true/false, yes/no, on/off)")
    return FLAGS[value.lower()]


def pattern(name, regex, what):
    """A value matching `regex` in full (`what` says which, for the message), None when unset."""
    value = _raw(name)
    if value is not None and re.fullmatch(regex, value) is None:
        raise ConfigError(f"{name}={value!r}: expected {what}")
    return value


def writable_file(name):
    """A file path whose folder exists (the file is written later, at exit), None when unset."""
    value = _raw(name)
    if value is not None and not os.path.isdir(os.path.dirname(os.path.abspath(value))):
        raise ConfigError(f"{name}={value!r}: the folder {os.path.dirname(os.path.abspath(value))!r} does not exist")
    return value


def executable(name):
    """The command $name names (found on the PATH or as a path), None when unset."""
    value = _raw(name)
    if value is not None and shutil.which(value) is None:
        raise ConfigError(f"{name}={value!r}: no such executable (a command on the PATH or a path to one); "
                          f"unset {name} to use the default")
    return value


_previous_hook = sys.excepthook


def _one_line(kind, error, traceback):
    """sys.excepthook: an uncaught ConfigError is its one line on stderr; anything else as before."""
    if isinstance(error, ConfigError):
        print(f"gpublas: {error}", file=sys.stderr)
    else:
        _previous_hook(kind, error, traceback)


sys.excepthook = _one_line
