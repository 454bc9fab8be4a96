"""A registry entry of an environment setting, and how a setting's text becomes its value:
each parser raises ValueError, with the words the ConfigError quotes, on a value it cannot
use (config.py's registry names them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    help: str
    parse: Callable[[str], Any] = str
    # Shown in docs/configuration.md instead of `default` when the default is derived from
    # another setting.
    default_doc: str | None = None


def positive_int(raw: str) -> int:
    value = int(raw)
    if value <= 0:
        raise ValueError("must be a positive integer")
    return value


def port(raw: str) -> int:
    value = int(raw)
    if not 1 <= value <= 65535:
        raise ValueError("must be between 1 and 65535")
    return value


def int_range(low: int, high: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        value = int(raw)
        if not low <= value <= high:
            raise ValueError(f"must be a whole number from {low} to {high}")
        return value

    return parse


def log_level(raw: str) -> str:
    level = raw.strip().upper()
    if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ValueError("must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL")
    return level


def choice(*choices: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")
        return value

    return parse


def optional(raw: str) -> str | None:
    return raw.strip() or None


def boolean(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ValueError("must be true or false")


def positive_number(raw: str) -> float:
    value = float(raw)
    if not value > 0:
        raise ValueError("must be a positive number")
    return value


def fraction(raw: str) -> float:
    value = float(raw)
    if not 0 <= value <= 1:
        raise ValueError("must be a number from 0 to 1")
    return value


def optional_fraction(raw: str) -> float | None:
    return fraction(raw) if raw.strip() else None


def json_list(raw: str) -> list:
    value = json.loads(raw)
    if not isinstance(value, list):
        raise ValueError("must be a JSON list")
    return value
