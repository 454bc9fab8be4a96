"""Marshmallow fields stricter than the stock ones, for JSON bodies (shared by every face)."""

from __future__ import annotations

import json
import math
from datetime import UTC

import marshmallow as ma
from marshmallow.validate import Regexp


class StrictBoolean(ma.fields.Boolean):
    """Only JSON true and false (the stock field also takes "yes", 1, "on"...)."""

    def _deserialize(self, value, attr, data, **kwargs):
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class StrictNumber(ma.fields.Float):
    """A finite JSON number; numeric strings and booleans are refused."""

    default_error_messages = {"invalid": "Not a valid number."}

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.make_error("invalid")
        if isinstance(value, float) and not math.isfinite(value):
            raise self.make_error("invalid")
        return value


class Timestamp(ma.fields.AwareDateTime):
    """An ISO-8601 date-time; one without a zone is taken as UTC."""

    def __init__(self, **kwargs) -> None:
        super().__init__(format="iso", default_timezone=UTC, **kwargs)


# A string with something besides white space; as a pattern, so the spec says it too.
not_blank = Regexp(r"[\s\S]*\S", error="Must not be blank.")


def plain_json(value: object) -> None:
    """Refuse NaN and Infinity, which Python's JSON parser accepts but JSON does not have."""
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        raise ma.ValidationError("Must be plain JSON: NaN and Infinity are not allowed.") from None


# For text that goes into an outbound request's headers: a NUL or a line break there fails
# at chat time (or splits the header), so it is refused when it is saved. A pattern, so that
# the spec says it too.
no_control_characters = Regexp(
    r"^[^\x00-\x1f\x7f]*(?![\s\S])",
    error="Must not contain control characters (NUL, line breaks...).",
)
# A secret sent as an HTTP header (`Authorization: Bearer ...`): printable ASCII alone, which
# is what a header can carry; anything else would fail only when the key is used.
header_value = Regexp(
    r"^[\x20-\x7e]*(?![\s\S])",
    error="Must be printable ASCII (letters, digits, punctuation): it is sent in a header.",
)


class ChangeSchema(ma.Schema):
    """A change (PUT): at least one field, or a 422 saying so (an empty body changes nothing
    and is most likely a mistake)."""

    @ma.validates_schema
    def _not_empty(self, data, **kwargs) -> None:
        if not data:
            raise ma.ValidationError("Give at least one field to change.")
