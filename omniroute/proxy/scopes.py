"""Whose memories a chat request reads and writes: its key, the end user it names, and the
session the `scope` setting may limit it to (docs/scopes.md)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from flask import Request

from omniroute.memory.model import user_id_problem
from omniroute.memory.settings import MemoryConfig
from omniroute.proxy.blueprint import bad_field

SESSION_HEADER = "x-omniroute-session-id"
USER_HEADER = "x-omniroute-user-id"


@dataclass(frozen=True)
class ChatScope:
    """`user_id`: the end user ('' for none); `session_id`: the request's session, as its
    extracted memories are labelled; `search_session`: the session retrieval is limited to
    (None: every session); `allowed`: False when the scope wants a user and none was named."""

    user_id: str
    session_id: str
    search_session: str | None
    allowed: bool


def end_user(request: Request, body: dict[str, Any]) -> str:
    """The end user a request names: the x-omniroute-user-id header, else OpenAI's own
    `user` field; '' for none. A bad one is a 400 naming the header or the field."""
    header = request.headers.get(USER_HEADER)
    if header is not None:
        value, field = header.strip(), USER_HEADER
    else:
        value, field = body.get("user"), "user"
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        bad_field(field, "user must be a string: the id of the end user the request is for.")
    if problem := user_id_problem(value):
        bad_field(field, problem)
    return value


def chat_scope(request: Request, body: dict[str, Any], settings: MemoryConfig) -> ChatScope:
    user_id = end_user(request, body)
    given = request.headers.get(SESSION_HEADER, "").strip()
    session_id = given or f"req-{uuid.uuid4()}"
    search_session = session_id if settings.scope == "session" else None
    allowed = bool(user_id) or settings.scope != "user"
    return ChatScope(user_id, session_id, search_session, allowed)
