"""The manager as the settings say: `backendConfigs` registers generic backends,
`primaryBackend` and `fallbackBackends` choose among them and the local store.

Every process reads the same settings, so each use compares them with what it applied and
rebuilds when they changed: a PUT in one web process reaches the others and the workers.
A settings change is checked first (`checked`): an unknown primary or fallback, or a config
the generic backend cannot use, is refused naming the field. Backend API keys are sealed
like provider keys before they are stored and shown masked (`public`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import httpx

from omniroute.core.sealed import KeyNeeded, SecretBox, keeps_stored_key, masked
from omniroute.memory.backends.base import named
from omniroute.memory.backends.kinds import (
    BACKEND_ID,
    BACKEND_ID_SHAPE,
    BadBackendConfig,
    StoredKeyMoved,
    UnknownBackendName,
    check_config,
    default_url,
    env_configs,
    make_backend,
)
from omniroute.memory.backends.local import LOCAL_ALIASES, LOCAL_ID
from omniroute.memory.backends.manager import MemoryManager, UnknownBackend
from omniroute.memory.settings import MemoryConfig, MemorySettings

log = logging.getLogger(__name__)

LOCAL_NAMES = frozenset({LOCAL_ID, *LOCAL_ALIASES})


def _url(config: Mapping[str, Any]) -> str | None:
    """Where a backend config sends its key: its base URL as the backend will use it."""
    given = config.get("baseUrl")
    if isinstance(given, str) and given.strip():
        return given.strip().rstrip("/")
    return default_url(config)


class BackendSetup:
    def __init__(
        self,
        manager: MemoryManager,
        settings: MemorySettings,
        box: SecretBox,
        http: httpx.Client,
        *,
        allow_local: bool,
        env: Mapping[str, Any] | None = None,
    ) -> None:
        """`env` is the app's config: OBSIDIAN_* and NOTION_* register those backends."""
        self.manager = manager
        self._env_configs = env_configs(env or {})
        self._settings = settings
        self._box = box
        self._http = http
        self._allow_local = allow_local
        self._applied: list[Any] | None = None
        self._remote: set[str] = set()
        self._lock = threading.Lock()

    def current(self, values: MemoryConfig | None = None) -> MemoryManager:
        """The manager, configured from the settings as they are now (`values`, when the
        caller has just read them)."""
        values = values or self._settings.get()
        wanted = [values.primary_backend, values.fallback_backends, values.backend_configs]
        with self._lock:
            if wanted != self._applied:
                self._apply(values)
                self._applied = wanted
        return self.manager

    def start(self) -> None:
        """Register the configured backends, and initialise the remote ones in the
        background (no database is read there): one that is down is logged and left to the
        health job, never holding the start."""
        manager = self.current()
        remote = sorted(self._remote)
        if remote:
            threading.Thread(
                target=lambda: manager.initialize_all(remote),
                name="omniroute-backends-start",
                daemon=True,
            ).start()

    def check(self) -> dict[str, Any]:
        """The periodic health check: each backend's health; one that is down is shut down
        (its next call initialises it again, and fails over while it cannot), one that
        answers again is initialised again (the backend-health job's figures)."""
        manager = self.current()
        report = {}
        for backend_id, health in manager.health().items():
            report[backend_id] = {"ok": health.ok, "latencyMs": health.latency_ms,
                                  "message": health.message}  # fmt: skip
            if not health.ok:
                backend = manager.backend(backend_id)
                log.warning("memory backend %s is down: %s", named(backend), health.message)
                backend.shutdown()
        again = [i for i, state in report.items() if state["ok"] and i in self._remote]
        if again:
            manager.initialize_all()
        return {"backends": report, "down": sum(1 for s in report.values() if not s["ok"])}

    def remote_writer(self):
        """Where extracted facts go when a backend other than the local store is primary:
        its upsert on the key (a retried job never stores a fact twice). None while the
        local store is: the extraction outbox then writes the facts in its own transaction,
        with the outbox row they came from."""
        manager = self.current()
        if manager.primary.id == LOCAL_ID:
            return None
        return lambda new: manager.upsert(new)[0]

    def _apply(self, values: MemoryConfig) -> None:
        """Register the configured backends in place of the ones applied before (those are
        shut down: a removed backend is never asked again, nor sent its key)."""
        added = []
        for backend_id, raw in {**self._env_configs, **values.backend_configs}.items():
            try:
                backend = make_backend(
                    backend_id, self._unsealed(raw), self._http, allow_local=self._allow_local
                )
            except (BadBackendConfig, TypeError) as exc:
                log.error("memory backend %s not registered: %s", backend_id, exc)
                continue
            added.append(backend)
        retired, self._remote = self._remote, {backend.id for backend in added}
        try:
            self.manager.replace(retired, added, values.primary_backend, values.fallback_backends)
        except UnknownBackend as exc:
            log.error("%s; the local store serves", exc)
            self.manager.replace(retired, added, LOCAL_ID)

    # -- a settings change ----------------------------------------------------------------

    def checked(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The change with backend API keys sealed; BadBackendConfig names a bad field.

        An `apiKey` left out (or null), or sent back masked as GET shows it, keeps the stored
        key, but only while `baseUrl` stays the same: with a new URL the key must be sent
        again (a stored key never goes to a host it was not given for); "" removes it.
        URLs pass the outbound guard here, and again at every use."""
        current = self._settings.get()
        changed = dict(changes)
        configs = changes.get("backendConfigs", current.backend_configs)
        if not isinstance(configs, Mapping):
            raise BadBackendConfig("backendConfigs", "must be an object of backend configs")
        sealed = {}
        for backend_id, raw in configs.items():
            field = f"backendConfigs.{backend_id}"
            if backend_id in LOCAL_NAMES:
                raise BadBackendConfig(field, "is the local store's name; choose another id")
            if backend_id not in current.backend_configs and not BACKEND_ID.match(backend_id):
                raise BadBackendConfig(field, f"an id is {BACKEND_ID_SHAPE}")
            if not isinstance(raw, Mapping):
                raise BadBackendConfig(field, "must be an object")
            try:
                entry = self._with_key(dict(raw), current.backend_configs.get(backend_id))
                check_config(self._unsealed(entry), allow_local=self._allow_local)
            except BadBackendConfig as exc:
                raise type(exc)(f"{field}.{exc.field}", str(exc).split(": ", 1)[1]) from None
            sealed[backend_id] = entry
        if "backendConfigs" in changes:
            changed["backendConfigs"] = sealed
        known = LOCAL_NAMES | set(sealed) | set(self._env_configs)
        primary = changes.get("primaryBackend", current.primary_backend)
        if primary not in known:
            raise UnknownBackendName(
                "primaryBackend", f"unknown backend {primary!r}: one of {', '.join(sorted(known))}"
            )
        for name in changes.get("fallbackBackends", current.fallback_backends):
            if name not in known:
                raise UnknownBackendName("fallbackBackends", f"unknown backend {name!r}")
        return changed

    def _with_key(self, entry: dict[str, Any], stored: Mapping[str, Any] | None) -> dict[str, Any]:
        stored = stored if isinstance(stored, Mapping) else {}
        kept = stored.get("apiKey")
        given = entry.get("apiKey")
        try:
            keep = keeps_stored_key(
                given,
                given_present=given is not None,
                stored=bool(kept),
                moved=_url(entry) != _url(stored),
            )
        except KeyNeeded as exc:
            raise StoredKeyMoved("apiKey", str(exc)) from None
        if keep and kept:
            entry["apiKey"] = kept
        elif keep or given == "":
            entry.pop("apiKey", None)
        elif isinstance(given, str):
            entry["apiKey"] = self._box.seal(given)
        return entry  # any other apiKey is left for check_config to refuse

    def _unsealed(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        entry = dict(raw)
        if isinstance(entry.get("apiKey"), str):
            entry["apiKey"] = self._box.open(entry["apiKey"])
        return entry

    def public(self, settings: MemoryConfig) -> dict[str, Any]:
        """Settings as the API shows them: each backend API key as `***` and its last four."""
        shown = settings.as_api()
        shown["backendConfigs"] = {
            backend_id: {**raw, "apiKey": masked(self._box.open(raw["apiKey"]))}
            if isinstance(raw, Mapping) and isinstance(raw.get("apiKey"), str)
            else raw
            for backend_id, raw in settings.backend_configs.items()
        }
        return shown
