import dataclasses
from pathlib import Path

import pytest

from omniroute.memory.settings import (
    MAX_BUDGET_TOKENS,
    SETTINGS,
    MemoryConfig,
    markdown_table,
)

pytestmark = pytest.mark.both_stores

API_DOC = Path(__file__).resolve().parent.parent / "docs" / "api.md"

DEFAULTS = {
    "enabled": False,
    "maxTokens": 2000,
    "retentionDays": 30,
    "retentionSweep": False,
    "autoSummarize": False,
    "autoSummarizeDays": 30,
    "summarizeBudgetTokens": 0,
    "summarizeProviderModel": None,
    "strategy": "hybrid",
    "scope": "apiKey",
    "globalBudgetPercent": 25,
    "embeddingSource": "auto",
    "embeddingProviderModel": None,
    "transformersEnabled": False,
    "staticEnabled": False,
    "multilingualEnabled": False,
    "rerankEnabled": False,
    "rerankProviderModel": None,
    "vectorStore": "auto",
    "primaryBackend": "sqlite",
    "fallbackBackends": [],
    "backendConfigs": {},
    "customBaseUrl": None,
    "customModelId": None,
}


def test_get_returns_every_default(client, admin):
    response = client.get("/api/settings/memory", headers=admin)
    assert response.status_code == 200
    assert response.json == DEFAULTS


# Section 9 of the reference: (API field, stored value, what it reads as).
NORMALISATION = [
    ("enabled", True, True),
    ("enabled", "true", False),
    ("enabled", 1, False),
    ("maxTokens", 1500, 1500),
    ("maxTokens", 1500.5, 1501),
    ("maxTokens", 1500.4, 1500),
    ("maxTokens", 20000, 16000),
    ("maxTokens", -3, 0),
    ("maxTokens", "1500", 2000),
    ("maxTokens", True, 2000),
    ("maxTokens", None, 2000),
    ("maxTokens", [1500], 2000),
    ("retentionDays", 0, 1),
    ("retentionDays", 400, 365),
    ("retentionDays", 7.5, 8),
    ("retentionDays", "7", 30),
    ("retentionSweep", True, True),
    ("retentionSweep", "on", False),
    ("autoSummarize", True, True),
    ("autoSummarize", 1, False),
    ("autoSummarizeDays", 0, 1),
    ("autoSummarizeDays", 9999, 365),
    ("summarizeBudgetTokens", -5, 0),
    ("summarizeBudgetTokens", 4000.4, 4000),
    ("summarizeProviderModel", "openai/gpt-4o-mini", "openai/gpt-4o-mini"),
    ("summarizeProviderModel", "", None),
    ("strategy", "recent", "recent"),
    ("strategy", "semantic", "semantic"),
    ("strategy", "exact", "hybrid"),
    ("scope", "session", "session"),
    ("scope", "user", "user"),
    ("scope", "global", "apiKey"),
    ("globalBudgetPercent", 0, 0),
    ("globalBudgetPercent", 150, 100),
    ("globalBudgetPercent", "10", 25),
    ("embeddingSource", "static", "static"),
    ("embeddingSource", "magic", "auto"),
    ("embeddingProviderModel", "openai/text-embedding-3-small", "openai/text-embedding-3-small"),
    ("embeddingProviderModel", "", None),
    ("embeddingProviderModel", 5, None),
    ("transformersEnabled", True, True),
    ("staticEnabled", "yes", False),
    ("multilingualEnabled", True, True),
    ("embeddingSource", "multilingual", "multilingual"),
    ("rerankEnabled", True, True),
    ("rerankProviderModel", "  ", None),
    ("vectorStore", "qdrant", "qdrant"),
    ("vectorStore", "sqlite-vec", "sqlite-vec"),
    ("vectorStore", "pgvector", "auto"),
    ("primaryBackend", "obsidian", "obsidian"),
    ("primaryBackend", "", "sqlite"),
    ("fallbackBackends", ["a", 3, "b"], ["a", "b"]),
    ("fallbackBackends", "a", []),
    ("backendConfigs", {"a": {"url": "x"}}, {"a": {"url": "x"}}),
    ("backendConfigs", [1], {}),
    ("customBaseUrl", "http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("customBaseUrl", "", None),
    ("customModelId", "bge-small", "bge-small"),
    ("customModelId", 3, None),
]


@pytest.mark.parametrize(("name", "stored", "expected"), NORMALISATION)
def test_stored_values_are_normalised(svc, client, admin, name, stored, expected):
    db_key = next(setting.db_key for setting in SETTINGS if setting.name == name)
    svc.settings.put({db_key: stored})
    assert client.get("/api/settings/memory", headers=admin).json[name] == expected


def test_the_normalisation_table_covers_every_field():
    assert {name for name, _, _ in NORMALISATION} == {setting.name for setting in SETTINGS}
    assert MemoryConfig.from_stored({}).as_api() == DEFAULTS


def test_the_typed_config_has_one_attribute_per_setting_in_the_registrys_order():
    attributes = [field.name for field in dataclasses.fields(MemoryConfig)]
    assert attributes == [setting.attr for setting in SETTINGS]
    assert SETTINGS[1].name == "maxTokens" and SETTINGS[1].attr == "max_tokens"


def test_the_typed_config_is_frozen_and_its_containers_read_only():
    config = MemoryConfig.of({"fallbackBackends": ["sqlite"], "backendConfigs": {"b": {}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.enabled = True
    with pytest.raises(TypeError):
        config.backend_configs["c"] = {}
    assert config.fallback_backends == ("sqlite",)
    assert config.as_api()["fallbackBackends"] == ["sqlite"]
    assert config.as_api()["backendConfigs"] == {"b": {}}


def test_put_writes_only_the_given_fields(client, admin, svc):
    response = client.put(
        "/api/settings/memory", json={"enabled": True, "maxTokens": 99999}, headers=admin
    )
    assert response.status_code == 200
    assert response.json == {**DEFAULTS, "enabled": True, "maxTokens": 16000}
    assert svc.settings.all() == {"memoryEnabled": True, "memoryMaxTokens": 16000}
    client.put("/api/settings/memory", json={"strategy": "recent"}, headers=admin)
    after = client.get("/api/settings/memory", headers=admin).json
    assert (after["enabled"], after["maxTokens"], after["strategy"]) == (True, 16000, "recent")


def test_the_budget_setting_keeps_the_specifications_range_and_a_request_clamps_to_8000(
    client, admin, svc
):
    assert MAX_BUDGET_TOKENS == 8000
    assert MemoryConfig.from_stored({"memoryMaxTokens": 10**6}).max_tokens == 16000
    key, _ = svc.keys.create("budget")
    for n in range(12):
        svc.memories.create(api_key_id=key.id, key=f"note:{n}", content="porto " * 3000)
    preview = client.post(
        "/api/memory/retrieve-preview",
        json={"apiKeyId": key.id, "query": "porto", "maxTokens": 16000},
        headers=admin,
    )
    assert preview.status_code == 200, preview.json
    assert preview.json["budgetMaxTokens"] == 8000
    injected = [item for item in preview.json["memories"] if item["injected"]]
    assert sum(item["tokens"] for item in injected) <= 8000


def test_skills_enabled_is_not_a_setting_here(client, admin, svc):
    # There is no skills subsystem, so the reference's switch is refused, not silently kept.
    response = client.put("/api/settings/memory", json={"skillsEnabled": False}, headers=admin)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "skillsEnabled"
    assert "skillsEnabled" not in client.get("/api/settings/memory", headers=admin).json


def test_the_spec_describes_every_setting_from_the_registry(client):
    schemas = client.get("/openapi.json").json["components"]["schemas"]
    for schema in ("MemorySettings", "MemorySettingsUpdate"):
        properties = schemas[schema]["properties"]
        assert list(properties) == [setting.name for setting in SETTINGS]
        assert all(properties[s.name]["description"].startswith(s.help) for s in SETTINGS)


def test_put_with_null_clears_an_optional_model(client, admin):
    client.put("/api/settings/memory", json={"embeddingProviderModel": "openai/e3"}, headers=admin)
    response = client.put(
        "/api/settings/memory", json={"embeddingProviderModel": None}, headers=admin
    )
    assert response.json["embeddingProviderModel"] is None


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"enabled": "true"}, "enabled"),
        ({"enabled": 1}, "enabled"),
        ({"maxTokens": "2000"}, "maxTokens"),
        ({"maxTokens": True}, "maxTokens"),
        ({"strategy": "exact"}, "strategy"),
        ({"vectorStore": "pgvector"}, "vectorStore"),
        ({"fallbackBackends": [1]}, "fallbackBackends.0"),
        ({"backendConfigs": []}, "backendConfigs"),
        ({"memoryEnabled": True}, "memoryEnabled"),
        ({"customBaseUrl": "http://169.254.169.254/v1"}, "customBaseUrl"),
        ({"customBaseUrl": "https://u:p@example.com/v1"}, "customBaseUrl"),
        ({"customModelId": ""}, "customModelId"),
    ],
)
def test_put_refuses_values_of_the_wrong_kind_naming_the_field(client, admin, svc, body, field):
    response = client.put("/api/settings/memory", json=body, headers=admin)
    assert response.status_code == 422
    assert field in [detail["field"] for detail in response.json["error"]["details"]]
    assert svc.settings.all() == {}


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ('{"maxTokens": Infinity}', "maxTokens"),
        ('{"backendConfigs": {"a": NaN}}', "backendConfigs.a"),
    ],
)
def test_put_refuses_non_finite_numbers(client, admin, raw, field):
    response = client.put(
        "/api/settings/memory", data=raw, content_type="application/json", headers=admin
    )
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == field


def test_a_put_is_visible_at_once_despite_the_cache(client, admin):
    assert client.get("/api/settings/memory", headers=admin).json["enabled"] is False
    client.put("/api/settings/memory", json={"enabled": True}, headers=admin)
    assert client.get("/api/settings/memory", headers=admin).json["enabled"] is True


def test_the_readme_memory_settings_table_matches_the_registry():
    assert markdown_table() in API_DOC.read_text(encoding="utf-8"), (
        "docs/api.md's memory settings table is out of date: paste `make settings-table` into it"
    )
