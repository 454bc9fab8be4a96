import pytest

from omniroute.factory import create_app
from tests.helpers import ADMIN_TOKEN

pytestmark = pytest.mark.both_stores


def assert_error_shape(response, status: int, error_type: str) -> None:
    assert response.status_code == status
    assert response.is_json
    assert set(response.json) == {"error"}
    error = response.json["error"]
    assert set(error) == {"message", "type", "details"}
    assert error["type"] == error_type
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], list)


def test_unknown_routes_are_404_in_the_error_shape(client):
    assert_error_shape(client.get("/no/such/page"), 404, "not_found_error")


def test_a_wrong_method_is_405_with_allow(client):
    response = client.delete("/healthz")
    assert_error_shape(response, 405, "invalid_request_error")
    assert "GET" in response.headers["Allow"]


def test_a_body_over_max_body_bytes_is_413(tmp_path):
    app = create_app(
        {"DATA_DIR": str(tmp_path), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN, "MAX_BODY_BYTES": 1000}
    )
    response = app.test_client().post(
        "/api/memory",
        json={"apiKeyId": "k", "key": "k", "content": "x" * 2000},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
    )
    assert_error_shape(response, 413, "request_too_large")


@pytest.fixture
def failing_app(app):
    def explode():
        raise RuntimeError("secret internals: /etc/passwd at line 42")

    app.add_url_rule("/explode", view_func=explode)
    return app


def test_an_unexpected_error_is_a_500_without_internals(failing_app, caplog):
    response = failing_app.test_client().get("/explode")
    assert_error_shape(response, 500, "server_error")
    body = response.get_data(as_text=True)
    assert "secret internals" not in body and "Traceback" not in body
    assert "secret internals" in caplog.text, "the server log keeps the detail"


def test_validation_errors_carry_one_detail_per_field(client, admin):
    response = client.post("/api/memory", json={"type": "x", "userId": ""}, headers=admin)
    assert_error_shape(response, 422, "invalid_request_error")
    fields = {detail["field"] for detail in response.json["error"]["details"]}
    assert fields == {"content", "key", "type"}  # apiKeyId is optional: none is global
