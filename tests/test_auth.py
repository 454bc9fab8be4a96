import logging
import stat

import pytest

from omniroute.factory import create_app
from omniroute.web.auth import TOKEN_FILE_NAME, ensure_admin_token

pytestmark = pytest.mark.both_stores


def test_a_configured_token_wins_and_no_file_is_written(tmp_path):
    assert ensure_admin_token("configured", str(tmp_path)) == "configured"
    assert not (tmp_path / TOKEN_FILE_NAME).exists()


def test_the_first_start_generates_a_private_token_and_logs_only_its_path(tmp_path, caplog):
    with caplog.at_level(logging.INFO):
        app = create_app({"DATA_DIR": str(tmp_path)})
    token = app.config["OMNIROUTE_ADMIN_TOKEN"]
    token_file = tmp_path / TOKEN_FILE_NAME
    assert token_file.read_text().strip() == token
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert str(token_file) in caplog.text
    assert token not in caplog.text
    response = app.test_client().get("/api/keys", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200


def test_later_starts_reuse_the_stored_token(tmp_path):
    first = ensure_admin_token(None, str(tmp_path))
    assert ensure_admin_token(None, str(tmp_path)) == first
    assert len(first) > 40


def test_with_redis_a_process_without_a_shared_secret_key_says_so(tmp_path, caplog):
    # Several processes (a worker at least) must unseal the same provider keys.
    with caplog.at_level(logging.WARNING):
        app = create_app(
            {
                "DATA_DIR": str(tmp_path),
                "OMNIROUTE_ADMIN_TOKEN": "t",
                "REDIS_URL": "redis://127.0.0.1:1/0",
            }
        )
    assert "OMNIROUTE_SECRET_KEY not set" in caplog.text  # the admin token was given: not named
    assert "OMNIROUTE_ADMIN_TOKEN and" not in caplog.text
    assert app.config["SECRET_KEY"] not in caplog.text, "the key itself is never logged"
    app.extensions["omniroute"].close()
