"""mem0's words for the gateway's memories: a memory and its history as mem0 answers them,
and what a request's entities and filters ask for."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from omniroute.core.clock import to_iso
from omniroute.memory.model import Memory, user_id_problem

# The ids mem0 scopes a memory by: `user_id` is an end user of the key, `run_id` a session;
# `agent_id` and `app_id` have no place of their own here and live in the metadata.
ENTITIES = ("user_id", "agent_id", "app_id", "run_id")
IN_METADATA = ("agent_id", "app_id")
ANY = "*"  # mem0's wildcard: any value, the field left unfiltered
DATE_OPERATORS = ("gte", "gt", "lte", "lt")
HISTORY_EVENTS = {"create": "ADD", "update": "UPDATE", "delete": "DELETE"}


class BadInput(ValueError):
    """A request mem0 would refuse with 400: `field` names the part."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Entities:
    """What a request names: an end user, an agent, an app, a run, a creation window."""

    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    created_after: str | None = None  # ISO text, inclusive
    created_before: str | None = None  # ISO text, exclusive

    @property
    def named(self) -> bool:
        return any(getattr(self, name) is not None for name in ENTITIES)

    def holds(self, memory: Memory) -> bool:
        """Whether a memory matches every id named (the creation window is the store's)."""
        return (
            (self.user_id is None or memory.user_id == self.user_id)
            and (self.run_id is None or memory.session_id == self.run_id)
            and all(
                getattr(self, name) is None or memory.metadata.get(name) == getattr(self, name)
                for name in IN_METADATA
            )
        )


def entities_of(given: Mapping[str, Any], filters: Any = None) -> Entities:
    """The entities of a body's (or query's) top-level ids and its `filters`: a dict of ids,
    `AND` lists of such dicts, and `created_at` with gte/gt/lte/lt. mem0's other filters
    (OR, NOT, metadata, categories...) are refused naming them: answering them as if they
    were not there would widen what a request reaches."""
    found: dict[str, Any] = {}
    for name in ENTITIES:
        if given.get(name) is not None:
            found[name] = _entity(name, given[name], name)
    if filters is not None:
        _read_filters(filters, "filters", found)
    return Entities(**found)


def _read_filters(filters: Any, where: str, found: dict[str, Any]) -> None:
    if not isinstance(filters, Mapping):
        raise BadInput(where, "must be an object")
    for name, value in filters.items():
        path = f"{where}.{name}"
        if name == "AND":
            if not isinstance(value, list):
                raise BadInput(path, "must be a list of filter objects")
            for index, part in enumerate(value):
                _read_filters(part, f"{path}.{index}", found)
        elif name in ENTITIES:
            if value == ANY:
                continue
            entity = _entity(name, value, path)
            if found.get(name, entity) != entity:
                raise BadInput(path, f"names another {name} than the request does")
            found[name] = entity
        elif name == "created_at":
            _read_window(value, path, found)
        else:
            raise BadInput(path, "is not a filter this gateway serves (docs/mem0.md)")


def _entity(name: str, value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise BadInput(path, "must be a non-empty string")
    if name == "user_id" and (problem := user_id_problem(value)):
        raise BadInput(path, problem)
    if len(value) > 256:
        raise BadInput(path, "has at most 256 characters")
    return value


def _read_window(value: Any, path: str, found: dict[str, Any]) -> None:
    """`created_at`'s bounds as the store's: created_after inclusive, created_before
    exclusive (a date alone is its whole day: `lte` a date takes that day in)."""
    if not isinstance(value, Mapping) or not value:
        raise BadInput(path, "must be an object of gte, gt, lte or lt")
    for operator, given in value.items():
        if operator not in DATE_OPERATORS:
            raise BadInput(f"{path}.{operator}", "must be one of gte, gt, lte, lt")
        moment, step = _moment(given, f"{path}.{operator}")
        if operator in ("gt", "lte"):  # past the moment (or the day) named
            moment += step
        found["created_after" if operator in ("gte", "gt") else "created_before"] = to_iso(moment)


def _moment(given: Any, path: str) -> tuple[datetime, timedelta]:
    """A date (YYYY-MM-DD: its start, and a day) or an ISO time (and a millisecond, the
    store's precision), in UTC."""
    if isinstance(given, str):
        try:
            if len(given) == 10:
                return datetime.combine(date.fromisoformat(given), time(), UTC), timedelta(days=1)
            moment = datetime.fromisoformat(given.replace("Z", "+00:00"))
            return moment.replace(tzinfo=moment.tzinfo or UTC), timedelta(milliseconds=1)
        except ValueError:
            pass
    raise BadInput(path, "must be a date (YYYY-MM-DD) or an ISO time")


def memory_json(memory: Memory, score: float | None = None) -> dict[str, Any]:
    """A memory as mem0 answers one."""
    metadata = {k: v for k, v in memory.metadata.items() if k not in IN_METADATA}
    category = metadata.get("category")
    shown: dict[str, Any] = {
        "id": memory.id,
        "memory": memory.content,
        "user_id": memory.user_id or None,
        "agent_id": memory.metadata.get("agent_id"),
        "app_id": memory.metadata.get("app_id"),
        "run_id": memory.session_id or None,
        "hash": hashlib.md5(memory.content.encode("utf-8")).hexdigest(),
        "metadata": metadata or None,
        "categories": [category] if isinstance(category, str) else [],
        "immutable": False,
        "expiration_date": memory.expires_at[:10] if memory.expires_at else None,
        "created_at": memory.created_at,
        "updated_at": memory.updated_at,
    }
    if score is not None:
        shown["score"] = score
    return shown


def history_json(entry: Mapping[str, Any], user_id: str | None) -> dict[str, Any]:
    """One change of a memory as mem0's history lists it."""
    return {
        "id": str(entry["seq"]),
        "memory_id": entry["memory_id"],
        "user_id": user_id,
        "event": HISTORY_EVENTS.get(entry["action"], entry["action"].upper()),
        "old_memory": entry["old_content"],
        "new_memory": entry["new_content"],
        "reason": entry.get("reason"),
        "created_at": entry["created_at"],
        "updated_at": entry["created_at"],
    }
