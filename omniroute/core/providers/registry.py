"""The registry of upstream providers, the default one, and how a model finds its provider."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, insert, select, update

from omniroute.core.clock import now_iso
from omniroute.core.db import Database
from omniroute.core.db.read_cache import ReadCache
from omniroute.core.db.settings_store import SettingsStore
from omniroute.core.db.tables import providers
from omniroute.core.sealed import SecretBox

DEFAULT_PROVIDER_SETTING = "defaultProvider"


@dataclass(frozen=True)
class Provider:
    id: str
    base_url: str
    api_key: str | None = None
    models: list[str] = field(default_factory=list)
    embedding_models: list[dict[str, Any]] = field(default_factory=list)
    supports_system_role: bool = True
    created_at: str = ""
    updated_at: str = ""

    @property
    def has_key(self) -> bool:
        return bool(self.api_key)

    @property
    def api_key_masked(self) -> str | None:
        return f"...{self.api_key[-4:]}" if self.api_key else None


class UnknownProvider(LookupError):
    pass


def split_model_ref(ref: str) -> tuple[str, str]:
    """`provider/model` as (provider id, bare model); a bare model has no provider id."""
    provider_id, slash, bare = ref.partition("/")
    return (provider_id, bare) if slash else ("", ref)


class ProviderStore:
    def __init__(self, database: Database, settings: SettingsStore, box: SecretBox) -> None:
        self.db = database
        self.settings = settings
        self.box = box  # API keys are stored sealed
        # Every chat looks its provider up: kept for a few seconds, cleared by our writes.
        self._by_id: ReadCache[Provider] = ReadCache(256)

    def seal_plain_keys(self) -> int:
        """Seal the API keys stored in plain text (by versions before sealing); return how many.

        Run at every start (and by `db upgrade`): idempotent, and cheap once all are sealed.
        """
        with self.db.write() as conn:
            rows = conn.execute(
                select(providers.c.id, providers.c.api_key).where(
                    providers.c.api_key.is_not(None), providers.c.api_key.not_like("fernet:%")
                )
            ).all()
            for provider_id, plain in rows:
                conn.execute(
                    update(providers)
                    .where(providers.c.id == provider_id)
                    .values(api_key=self.box.seal(plain))
                )
        self._by_id.clear()
        return len(rows)

    def default_id(self) -> str | None:
        """The provider of models given without a `provider/` prefix, if one is chosen."""
        return self.settings.all().get(DEFAULT_PROVIDER_SETTING) or None

    def set_default(self, provider_id: str | None) -> None:
        self.settings.put({DEFAULT_PROVIDER_SETTING: provider_id or None})

    def for_model_ref(self, ref: str) -> tuple[Provider, str] | None:
        """The provider and bare model of `provider/model`, or None when it names none."""
        provider_id, bare = split_model_ref(ref)
        provider = self.get(provider_id) if provider_id and bare else None
        return (provider, bare) if provider is not None else None

    def list_providers(self) -> list[Provider]:
        with self.db.read() as conn:
            rows = conn.execute(select(providers).order_by(providers.c.id)).mappings()
            return [_from_row(row, self.box) for row in rows]

    def get(self, provider_id: str) -> Provider | None:
        return self._by_id.get(provider_id, lambda: self._read(provider_id))

    def _read(self, provider_id: str) -> Provider | None:
        with self.db.read() as conn:
            row = (
                conn.execute(select(providers).where(providers.c.id == provider_id))
                .mappings()
                .first()
            )
        return _from_row(row, self.box) if row is not None else None

    def save(self, provider_id: str, fields: Mapping[str, Any]) -> tuple[Provider, bool]:
        """Create the provider, or change the given fields of it; return it and if created."""
        now = now_iso()
        values = _to_columns(fields, self.box)
        with self.db.write() as conn:
            exists = conn.execute(
                select(providers.c.id).where(providers.c.id == provider_id)
            ).first()
            if exists:
                conn.execute(
                    update(providers)
                    .where(providers.c.id == provider_id)
                    .values(**values, updated_at=now)
                )
            else:
                conn.execute(
                    insert(providers).values(
                        id=provider_id, **values, created_at=now, updated_at=now
                    )
                )
        self._by_id.clear()
        provider = self.get(provider_id)
        assert provider is not None
        return provider, not exists

    def delete(self, provider_id: str) -> bool:
        with self.db.write() as conn:
            result = conn.execute(delete(providers).where(providers.c.id == provider_id))
        self._by_id.clear()
        return result.rowcount == 1


def resolve_model(store: ProviderStore, model: str) -> tuple[Provider, str]:
    """Find the provider of `provider/model`, or of a bare model (the default provider's).

    A model whose prefix is not a provider goes whole to the default provider, so model ids
    with a slash of their own ("meta-llama/llama-3") work behind a default such as OpenRouter.
    """
    if (found := store.for_model_ref(model)) is not None:
        return found
    provider_id, _ = split_model_ref(model)
    default_provider = store.default_id()
    if default_provider:
        provider = store.get(default_provider)
        if provider is None:
            raise UnknownProvider(f"The default provider {default_provider!r} does not exist.")
        return provider, model
    if provider_id:
        known = ", ".join(p.id for p in store.list_providers()) or "none yet"
        raise UnknownProvider(f"Unknown provider {provider_id!r} (known: {known}).")
    raise UnknownProvider(
        f"Model {model!r} names no provider: use 'provider/model', or set "
        f"{DEFAULT_PROVIDER_SETTING} with PUT /api/settings/gateway."
    )


def _to_columns(fields: Mapping[str, Any], box: SecretBox) -> dict[str, Any]:
    columns = {}
    for name, value in fields.items():
        if name in ("models", "embedding_models"):
            value = json.dumps(value)
        elif name == "supports_system_role":
            value = int(value)
        elif name == "api_key" and value:
            value = box.seal(value)
        columns[name] = value
    return columns


def _from_row(row: Mapping[str, Any], box: SecretBox) -> Provider:
    return Provider(
        id=row["id"],
        base_url=row["base_url"],
        api_key=box.open(row["api_key"]) if row["api_key"] else None,
        models=json.loads(row["models"]),
        embedding_models=json.loads(row["embedding_models"]),
        supports_system_role=bool(row["supports_system_role"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )
