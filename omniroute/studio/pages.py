"""The studio's pages: memory (three tabs), settings, activity, API keys and providers."""

from __future__ import annotations

from flask import abort, render_template, request

from omniroute.core.activity import WINDOWS
from omniroute.memory import settings as registry
from omniroute.memory.model import MEMORY_TYPES
from omniroute.services import services
from omniroute.studio.blueprint import bp
from omniroute.studio.charts import activity_charts, window_totals
from omniroute.studio.memory_tabs import (
    backends_card,
    compact_card,
    engine_tab,
    memories_tab,
    playground_tab,
    qdrant_card,
)

TABS = ("memories", "playground", "engine")
SETTINGS_TABS = (("memory", "Memory"),)


@bp.get("/memory")
def memory():
    svc = services()
    tab = request.args.get("tab") if request.args.get("tab") in TABS else "memories"
    settings = svc.memory_settings.get()
    all_keys = svc.keys.list_keys(include_revoked=True)
    active_keys = [key for key in all_keys if key.revoked_at is None]
    if tab == "memories":
        details = {**memories_tab(svc, request.args), **compact_card(svc, request.args, all_keys)}
    elif tab == "playground":
        details = playground_tab(svc, request.args, settings, all_keys)
    else:
        details = _engine_cards(svc, all_keys)
    return render_template(
        "studio/memory.html",
        tab=tab,
        tabs=TABS,
        active_keys=active_keys,
        memory_types=MEMORY_TYPES,
        **_settings_context(settings, all_keys),
        **details,
    )


@bp.get("/settings")
def settings():
    """The memory settings where the specification puts them (Settings -> Memory): the
    switch with its token-cost warning and the Engine tab's forms, which write the same
    settings through the same API."""
    svc = services()
    all_keys = svc.keys.list_keys(include_revoked=True)
    return render_template(
        "studio/settings.html",
        tab="memory",
        tabs=SETTINGS_TABS,
        **_settings_context(svc.memory_settings.get(), all_keys),
        **_engine_cards(svc, all_keys),
    )


def _engine_cards(svc, all_keys) -> dict:
    return {
        **engine_tab(svc),
        **qdrant_card(svc, request.args, all_keys),
        **backends_card(svc, request.args),
    }


def _settings_context(settings, all_keys) -> dict:
    return {
        "settings": settings,
        "all_keys": all_keys,
        "key_names": {key.id: key.name for key in all_keys},
        "setting_fields": registry.BY_NAME,
        "budget_clamp": registry.MAX_BUDGET_TOKENS,
    }


@bp.get("/memory/<memory_id>/history")
def memory_history(memory_id: str):
    svc = services()
    entries = svc.memories.history(memory_id)
    if not entries:
        abort(404, description=f"No memory {memory_id} has ever existed.")
    key_names = {key.id: key.name for key in svc.keys.list_keys(include_revoked=True)}
    return render_template(
        "studio/history.html",
        memory_id=memory_id,
        memory=svc.memories.get(memory_id),
        entries=entries,
        key_name=key_names.get(entries[0]["api_key_id"], entries[0]["api_key_id"]),
    )


@bp.get("/activity")
def activity():
    window = request.args.get("window") if request.args.get("window") in WINDOWS else "hour"
    steps = services().activity.window(window)
    return render_template(
        "studio/activity.html",
        window=window,
        windows=WINDOWS,
        charts=activity_charts(steps, window),
        totals=window_totals(steps),
    )


@bp.get("/keys")
def keys():
    every = services().keys.list_keys(include_revoked=True)
    return render_template(
        "studio/keys.html",
        keys=[key for key in every if key.revoked_at is None],
        revoked=[key for key in every if key.revoked_at is not None],
    )


@bp.get("/providers")
def providers():
    return render_template(
        "studio/providers.html",
        providers=services().providers.list_providers(),
        gateway={"defaultProvider": services().providers.default_id()},
    )
