"""What a provider is made of, as the REST API and OMNIROUTE_PROVIDERS give it.

Base URLs pass the outbound URL guard without being resolved (a host may come up later), with
the app's OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS; they are checked again, resolved, before use.
"""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from flask import current_app
from marshmallow.validate import Length, Range, Regexp

from omniroute.core.config import ConfigError
from omniroute.core.errors import flat_messages
from omniroute.core.fields import ChangeSchema, StrictBoolean, header_value, no_control_characters
from omniroute.core.net import HTTP_URL_PATTERN, URL_SHAPE, BlockedURL, check_base_url
from omniroute.core.providers.registry import ProviderStore

PROVIDER_ID = Regexp(
    r"^[a-z0-9][a-z0-9._-]{0,63}$",
    error="Use 1 to 64 lowercase letters, digits, '.', '_' or '-' (no '/').",
)


HTTP_URL = Regexp(HTTP_URL_PATTERN, error=f"Must be {URL_SHAPE}.")


def guarded_url(value: str) -> None:
    """Validate an outbound base URL with the outbound URL guard (without resolving it)."""
    try:
        check_base_url(
            value,
            allow_local=current_app.config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
            resolve=False,
        )
    except BlockedURL as exc:
        raise ma.ValidationError(str(exc)) from None


class EmbeddingModelSchema(ma.Schema):
    id = ma.fields.String(required=True, validate=[Length(1, 200), no_control_characters])
    dimensions = ma.fields.Integer(required=True, strict=True, validate=Range(1, 65536))


class ProviderFieldsSchema(ma.Schema):
    """The changeable fields; every one optional (PUT)."""

    baseUrl = ma.fields.String(attribute="base_url", validate=[HTTP_URL, guarded_url])
    apiKey = ma.fields.String(
        attribute="api_key",
        allow_none=True,
        validate=header_value,
        metadata={"description": 'Never returned. null or "" removes it.'},
    )
    models = ma.fields.List(ma.fields.String(validate=[Length(1, 200), no_control_characters]))
    embeddingModels = ma.fields.List(
        ma.fields.Nested(EmbeddingModelSchema), attribute="embedding_models"
    )
    supportsSystemRole = StrictBoolean(
        attribute="supports_system_role",
        metadata={"description": "false: memory goes in a user message, not a system one."},
    )

    @ma.post_load
    def _normalise(self, data: dict[str, Any], **kwargs) -> dict[str, Any]:
        if "base_url" in data:
            data["base_url"] = data["base_url"].strip().rstrip("/")
        if "api_key" in data and not data["api_key"]:
            data["api_key"] = None
        return data


class ProviderChangeSchema(ProviderFieldsSchema, ChangeSchema):
    """A PUT: at least one field."""


class ProviderCreateSchema(ProviderFieldsSchema):
    id = ma.fields.String(required=True, validate=PROVIDER_ID)
    baseUrl = ma.fields.String(
        attribute="base_url", required=True, validate=[HTTP_URL, guarded_url]
    )


PROVIDER_SHAPE = (
    '{"id": "openai", "baseUrl": "https://api.openai.com/v1", "apiKey": "sk-...", '
    '"models": ["gpt-4o"], "embeddingModels": [{"id": "text-embedding-3-small", '
    '"dimensions": 1536}], "supportsSystemRole": true}'
)


def seed_providers(store: ProviderStore, entries: list[Any]) -> None:
    """Create or update the providers of OMNIROUTE_PROVIDERS (in the app's context); a bad
    entry is a ConfigError naming it, its field and the shape wanted, in one line."""
    schema = ProviderCreateSchema()
    for number, entry in enumerate(entries):
        try:
            fields = schema.load(entry)
        except ma.ValidationError as exc:
            problems = "; ".join(
                f"{detail['field']}: {detail['message']}" for detail in flat_messages(exc.messages)
            )
            raise ConfigError(
                f"OMNIROUTE_PROVIDERS[{number}] is invalid ({problems}); each item is an "
                f"object such as {PROVIDER_SHAPE}"
            ) from None
        store.save(fields.pop("id"), fields)
