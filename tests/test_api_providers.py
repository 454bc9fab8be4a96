import subprocess
import sys
from pathlib import Path

import pytest

from omniroute.core.config import ConfigError
from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN, environment

pytestmark = pytest.mark.both_stores

PROVIDER = {
    "id": "openai",
    "baseUrl": "https://api.openai.com/v1/",
    "apiKey": "sk-upstream-secret-9876",
    "models": ["gpt-4o", "gpt-4o-mini"],
    "embeddingModels": [{"id": "text-embedding-3-small", "dimensions": 1536}],
}


def fields(response) -> list[str]:
    return [detail["field"] for detail in response.json["error"]["details"]]


def test_create_list_get_never_show_the_key(client, admin):
    response = client.post("/api/providers", json=PROVIDER, headers=admin)
    assert response.status_code == 201
    provider = response.json["provider"]
    assert provider["baseUrl"] == "https://api.openai.com/v1"
    assert (provider["hasKey"], provider["apiKeyMasked"]) == (True, "...9876")
    assert provider["supportsSystemRole"] is True
    assert provider["embeddingModels"] == PROVIDER["embeddingModels"]
    for response in (
        client.get("/api/providers", headers=admin),
        client.get("/api/providers/openai", headers=admin),
    ):
        assert "sk-upstream-secret" not in response.get_data(as_text=True)
        assert "apiKey" not in str(response.json).replace("apiKeyMasked", "")


def test_put_changes_fields_and_an_empty_key_removes_it(client, admin):
    client.post("/api/providers", json=PROVIDER, headers=admin)
    response = client.put(
        "/api/providers/openai",
        json={"supportsSystemRole": False, "apiKey": "", "models": ["o1"]},
        headers=admin,
    )
    assert response.status_code == 200
    provider = response.json["provider"]
    assert (provider["supportsSystemRole"], provider["hasKey"], provider["models"]) == (
        False,
        False,
        ["o1"],
    )
    assert provider["baseUrl"] == "https://api.openai.com/v1"


def test_delete_and_404s(client, admin):
    client.post("/api/providers", json=PROVIDER, headers=admin)
    assert client.delete("/api/providers/openai", headers=admin).json == {"success": True}
    assert client.get("/api/providers/openai", headers=admin).status_code == 404
    assert client.delete("/api/providers/openai", headers=admin).status_code == 404
    assert client.put("/api/providers/x", json={"models": []}, headers=admin).status_code == 404


def test_a_second_provider_with_the_same_id_is_a_conflict(client, admin):
    client.post("/api/providers", json=PROVIDER, headers=admin)
    assert client.post("/api/providers", json=PROVIDER, headers=admin).status_code == 409


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"id": "Open/AI"}, "id"),
        ({"id": ""}, "id"),
        ({"baseUrl": "ftp://example.com"}, "baseUrl"),
        ({"baseUrl": "http://169.254.169.254/v1"}, "baseUrl"),
        ({"baseUrl": "https://u:p@example.com"}, "baseUrl"),
        ({"baseUrl": "https://example.com/v1?x=1"}, "baseUrl"),
        ({"models": "gpt-4o"}, "models"),
        ({"embeddingModels": [{"id": "e"}]}, "embeddingModels.0.dimensions"),
        ({"supportsSystemRole": "no"}, "supportsSystemRole"),
        ({"secret": 1}, "secret"),
    ],
)
def test_bad_providers_are_refused_naming_the_field(client, admin, change, field):
    response = client.post("/api/providers", json={**PROVIDER, **change}, headers=admin)
    assert response.status_code == 422
    assert field in fields(response)


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.1", "0x7f000001", "017700000001", "0177.0.0.1", "localhost"]
)
def test_local_urls_can_be_refused_however_the_address_is_written(tmp_path, host):
    app = create_app(
        {
            "DATA_DIR": str(tmp_path),
            "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
            "OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS": False,
        }
    )
    response = app.test_client().post(
        "/api/providers",
        json={"id": "ollama", "baseUrl": f"http://{host}:11434/v1"},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert response.status_code == 422
    assert "baseUrl" in fields(response)
    app.extensions["omniroute"].close()


def test_a_new_url_needs_the_key_again_and_a_masked_key_keeps_it_only_in_place(client, admin, svc):
    client.post("/api/providers", json=PROVIDER, headers=admin)
    for body in (
        {"baseUrl": "https://elsewhere.example.com/v1"},
        {"baseUrl": "https://elsewhere.example.com/v1", "apiKey": "...9876"},
    ):
        moved = client.put("/api/providers/openai", json=body, headers=admin)
        assert moved.status_code == 409 and fields(moved) == ["apiKey"], moved.json
        assert "send the API key again" in moved.json["error"]["details"][0]["message"]
    assert svc.providers.get("openai").base_url == "https://api.openai.com/v1", "nothing saved"
    kept = client.put("/api/providers/openai", json={"apiKey": "...9876", "models": ["o1"]},
                      headers=admin)  # fmt: skip
    assert kept.status_code == 200 and svc.providers.get("openai").api_key == PROVIDER["apiKey"]
    moved = client.put(
        "/api/providers/openai",
        json={"baseUrl": "https://elsewhere.example.com/v1", "apiKey": "sk-new-0001"},
        headers=admin,
    )
    assert moved.status_code == 200 and svc.providers.get("openai").api_key == "sk-new-0001"
    third = {"baseUrl": "https://third.example.com", "apiKey": None}
    unkeyed = client.put("/api/providers/openai", json=third, headers=admin)
    assert unkeyed.status_code == 200 and svc.providers.get("openai").api_key is None


def test_a_change_with_no_field_is_refused(client, admin):
    client.post("/api/providers", json=PROVIDER, headers=admin)
    response = client.put("/api/providers/openai", json={}, headers=admin)
    assert response.status_code == 422


def test_providers_are_seeded_from_the_environment_setting(tmp_path):
    config = {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN}
    app = create_app({**config, "OMNIROUTE_PROVIDERS": [PROVIDER]})
    assert app.extensions["omniroute"].providers.get("openai").models == PROVIDER["models"]
    changed = {**PROVIDER, "models": ["gpt-5"]}
    again = create_app({**config, "OMNIROUTE_PROVIDERS": [changed]})
    assert again.extensions["omniroute"].providers.get("openai").models == ["gpt-5"]


def test_an_invalid_seeded_provider_stops_the_start_naming_it(tmp_path):
    with pytest.raises(ConfigError, match=r"OMNIROUTE_PROVIDERS\[0\].*baseUrl"):
        create_app(
            {
                "DATA_DIR": str(tmp_path),
                "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
                "OMNIROUTE_PROVIDERS": [{"id": "x", "baseUrl": "file:///etc"}],
            }
        )


def test_the_default_provider_must_exist(client, admin):
    response = client.put("/api/settings/gateway", json={"defaultProvider": "nope"}, headers=admin)
    assert response.status_code == 404 and fields(response) == ["defaultProvider"]
    client.post("/api/providers", json=PROVIDER, headers=admin)
    response = client.put(
        "/api/settings/gateway", json={"defaultProvider": "openai"}, headers=admin
    )
    assert response.json == {"defaultProvider": "openai"}
    cleared = client.put("/api/settings/gateway", json={"defaultProvider": None}, headers=admin)
    assert cleared.json == {"defaultProvider": None}


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("OMNIROUTE_PROVIDERS",
         '[{"id": "x", "baseUrl": "http://127.0.0.1:9/v1", "embeddingModels": ["e-3"]}]',
         "OMNIROUTE_PROVIDERS[0] is invalid (embeddingModels.0"),
        ("MAX_OPEN_STREAMS", "many", "MAX_OPEN_STREAMS='many' is invalid"),
    ],
)  # fmt: skip
def test_a_bad_setting_stops_the_release_with_one_line_naming_it(tmp_path, name, value, named):
    done = subprocess.run(
        [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"],
        cwd=Path(__file__).resolve().parent.parent,
        env=environment(DATA_DIR=str(tmp_path), **{name: value}),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]  # after the log lines of the start
    assert last.startswith("omniroute: configuration error: ") and named in last
    if name == "OMNIROUTE_PROVIDERS":
        assert '[{"id": "text-embedding-3-small", "dimensions": 1536}]' in last
