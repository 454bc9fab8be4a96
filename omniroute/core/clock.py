"""UTC time as the fixed-width ISO-8601 text that the database stores and the API shows."""

from __future__ import annotations

from datetime import UTC, datetime

_FORMAT = "%Y-%m-%dT%H:%M:%S"


def utc_now() -> datetime:
    return datetime.now(UTC)


def to_iso(moment: datetime) -> str:
    """Format as `2026-01-31T12:00:00.000Z`; naive datetimes are taken to be UTC.

    One fixed width for every stored time means text order is time order in SQL.
    """
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    return f"{moment.strftime(_FORMAT)}.{moment.microsecond // 1000:03d}Z"


def now_iso() -> str:
    return to_iso(utc_now())
