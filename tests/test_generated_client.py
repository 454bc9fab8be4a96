"""A client generated from our spec by openapi-python-client drives the main flows against
the real server: the spec cannot rot without this failing."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ADMIN_TOKEN

pytestmark = pytest.mark.slow
PACKAGE = "omr_client"


@pytest.fixture
def generated(gateway_app, tmp_path, monkeypatch):
    spec = tmp_path / "openapi.json"
    spec.write_text(json.dumps(gateway_app.test_client().get("/openapi.json").json))
    bin_dir = Path(sys.executable).parent
    result = subprocess.run(
        [str(bin_dir / "openapi-python-client"), "generate", "--path", str(spec),
         "--meta", "none", "--output-path", str(tmp_path / PACKAGE)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Warning" not in result.stdout, result.stdout
    monkeypatch.syspath_prepend(str(tmp_path))
    yield importlib.import_module(PACKAGE)
    for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
        del sys.modules[name]


def test_the_generated_client_manages_keys_and_memories(generated, gateway):
    with (
        generated.AuthenticatedClient(base_url=gateway.url, token=ADMIN_TOKEN) as client,
        generated.AuthenticatedClient(base_url=gateway.url, token="wrong") as refused,
    ):
        drive(client, refused)


def drive(client, refused):
    from omr_client.api.keys import create_key, list_keys
    from omr_client.api.memory import (
        clear_memories,
        create_memory,
        delete_memory,
        get_memory,
        list_memories,
        update_memory,
    )
    from omr_client.api.memory_engine import preview_retrieval
    from omr_client.models import (
        Error,
        KeyCreate,
        MemoryCreate,
        MemoryCreateType,
        MemoryUpdate,
        Preview,
        PreviewStrategy,
    )

    key = create_key.sync(client=client, body=KeyCreate(name="generated"))
    assert key.key.startswith("sk-omr-")
    assert [k.name for k in list_keys.sync(client=client).data] == ["generated"]

    created = create_memory.sync(
        client=client,
        body=MemoryCreate(
            api_key_id=key.id, key="preference:editor", content="Prefers Neovim",
            type_=MemoryCreateType.FACTUAL,
        ),
    )  # fmt: skip
    assert created.created is True
    memory_id = created.memory.id
    listed = list_memories.sync(client=client, api_key_id=key.id)
    assert listed.total == 1 and listed.data[0].content == "Prefers Neovim"

    update_memory.sync(memory_id, client=client, body=MemoryUpdate(content="Prefers Helix"))
    assert get_memory.sync(memory_id, client=client).memory.content == "Prefers Helix"

    preview = preview_retrieval.sync(
        client=client,
        body=Preview(query="helix", api_key_id=key.id, strategy=PreviewStrategy.KEYWORD),
    )
    assert [m.key for m in preview.memories] == ["preference:editor"]

    missing = get_memory.sync("no-such-id", client=client)
    assert isinstance(missing, Error) and "not found" in missing.error.message
    assert isinstance(list_keys.sync(client=refused), Error)

    assert delete_memory.sync(memory_id, client=client).success is True
    create_memory.sync(client=client, body=MemoryCreate(api_key_id=key.id, key="k", content="x"))
    cleared = clear_memories.sync(client=client, api_key_id=key.id)
    assert (cleared.matched, cleared.deleted_count) == (1, 1)
    assert list_memories.sync(client=client, api_key_id=key.id).total == 0
