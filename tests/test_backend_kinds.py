"""The registry of backend kinds: each kind's schema, check and factory agree, the
environment configures the kinds it names, and every kind made answers the whole interface
(its seven calls, the rest derived)."""

from __future__ import annotations

import inspect

import httpx
import pytest

from omniroute.memory.backends.base import MemoryBackend
from omniroute.memory.backends.kinds import (
    KINDS,
    BadBackendConfig,
    check_config,
    config_json_schema,
    env_configs,
    make_backend,
)
from omniroute.memory.backends.local import LocalBackend

# The least config of each kind, with every required field.
LEAST = {
    "generic": {"baseUrl": "http://127.0.0.1:9/"},
    "obsidian": {"type": "obsidian"},
    "notion": {"type": "notion", "databaseId": "db1"},
}
CALLS = [
    name for name, member in inspect.getmembers(MemoryBackend) if inspect.isfunction(member)
    and not name.startswith("_")
]  # fmt: skip


def test_every_kind_is_in_the_spec_and_has_a_least_config():
    assert set(KINDS) == set(LEAST)
    titles = [entry["title"] for entry in config_json_schema()["oneOf"]]
    assert titles == [f"{name} backend" for name in KINDS]


@pytest.mark.parametrize("name", sorted(LEAST))
def test_a_kinds_required_fields_are_what_its_check_needs(name):
    kind = KINDS[name]
    check_config(LEAST[name], allow_local=True)
    for field in kind.required:
        if field == "type":
            continue
        missing = {k: v for k, v in LEAST[name].items() if k != field}
        with pytest.raises(BadBackendConfig) as refused:
            check_config(missing, allow_local=True)
        assert refused.value.field == field
    with pytest.raises(BadBackendConfig) as unknown:
        check_config({**LEAST[name], "colour": "red"}, allow_local=True)
    assert unknown.value.field == "colour"
    with pytest.raises(BadBackendConfig) as not_text:
        check_config({**LEAST[name], "displayName": 7}, allow_local=True)
    assert not_text.value.field == "displayName"


@pytest.mark.parametrize("name", sorted(LEAST))
def test_every_kind_made_answers_the_whole_interface(name):
    with httpx.Client() as http:
        backend = make_backend("b1", LEAST[name], http, allow_local=True)
        assert backend.id == "b1" and backend.display_name
        missing = [call for call in CALLS if not callable(getattr(backend, call, None))]
        assert missing == []


def test_the_local_store_answers_every_call_itself():
    own = [
        call for call in CALLS if call in vars(LocalBackend) or call in {"initialize", "shutdown"}
    ]
    assert own == CALLS


def test_an_unknown_kind_is_refused_naming_type():
    for kind in ("vault", ["notion"], 3):
        with pytest.raises(BadBackendConfig) as refused:
            check_config({"type": kind}, allow_local=True)
        assert refused.value.field == "type"


def test_the_environment_configures_the_kinds_it_names():
    assert env_configs({}) == {}
    assert env_configs({"NOTION_API_KEY": "secret_x"}) == {}, "a database id is needed too"
    found = env_configs(
        {"OBSIDIAN_API_KEY": "o", "NOTION_API_KEY": "n", "NOTION_DATABASE_ID": "db"}
    )
    assert found["obsidian"]["apiKey"] == "o" and found["obsidian"]["type"] == "obsidian"
    assert found["notion"]["databaseId"] == "db"
    for config in found.values():
        check_config(config, allow_local=True)
