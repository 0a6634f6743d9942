"""One line for an option value ns-train refuses, where odin-splatfacto is being trained.

tyro reports a value outside an option's choices in a framed box of seven lines or more. For odin-splatfacto's
commands the refusal is said in one line instead, ``error: ...`` on stderr with exit status 2 as tyro's, holding all
the box said (the value, the option, the choices). tyro's parse-error hook is private (``tyro._errors``): where a
tyro release lacks it, its box stays.
"""

from __future__ import annotations

import sys
from typing import Any, Sequence

METHOD_NAME = "odin-splatfacto"


def refusal_line(value: Any, option: str, choices: Sequence[Any]) -> str:
    """The one line saying that ``option`` does not take ``value``."""
    return f"error: {option} does not take {value!r}; choose one of: {', '.join(str(choice) for choice in choices)}"


def _one_line_invalid_choice(event: Any) -> None:
    from tyro import _errors

    if isinstance(event, _errors.InvalidChoice):
        argument = event.argument
        print(refusal_line(event.value, argument.display_name(), argument.lowered.choices), file=sys.stderr)
        raise SystemExit(2)


def say_invalid_choices_in_one_line(argv: Sequence[str] | None = None) -> bool:
    """Install the one-line refusal for this process when its command trains odin-splatfacto (``argv``'s first
    argument; ``sys.argv`` by default); whether it was installed."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != METHOD_NAME:
        return False
    try:
        from tyro import _errors
    except ImportError:
        return False
    if not hasattr(_errors, "_parse_error_hook") or not hasattr(_errors, "InvalidChoice"):
        return False
    _errors._parse_error_hook.set(_one_line_invalid_choice)
    return True
