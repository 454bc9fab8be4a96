import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from omniroute.api.operation_ids import OPERATION_IDS, OperationIds, UnnamedOperation
from omniroute.api.spec_errors import is_mem0
from omniroute.core.net import check_base_url

HTTP_METHODS = {"get", "put", "post", "delete", "patch"}


@pytest.fixture
def spec(client):
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return response.json


def operations(spec):
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                yield path, method, operation


def test_every_operation_has_a_summary(spec):
    missing = [f"{m.upper()} {p}" for p, m, op in operations(spec) if not op.get("summary")]
    assert missing == []


def test_every_operation_has_a_unique_readable_operation_id(spec):
    ids = [op.get("operationId") for _, _, op in operations(spec)]
    # camelCase words; a word may end in digits (`Mem0`, mem0's name for itself)
    assert all(re.fullmatch(r"[a-z]+(?:[A-Z][a-z]+[0-9]*)+", name or "") for name in ids), ids
    assert len(set(ids)) == len(ids)
    stale = set(OPERATION_IDS.values()) - set(ids)
    assert stale == set(), "names in operation_ids.py for routes that are gone"


def test_a_route_without_an_operation_id_fails_loudly():
    with pytest.raises(UnnamedOperation, match="GET /api/new has no operationId"):
        OperationIds().operation_helper(path="/api/new", operations={"get": {}})


def test_the_spec_covers_every_route_of_the_api(spec, app):
    documented = {(p, m.upper()) for p, m, _ in operations(spec)}
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith(("/api/", "/v1/", "/metrics", "/healthz", "/readyz")):
            continue
        path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            assert (path, method) in documented, f"{method} {path} is not in the spec"


def test_api_operations_require_the_admin_token_and_probes_do_not(spec):
    assert spec["security"] == [{"adminToken": []}]
    assert spec["components"]["securitySchemes"]["adminToken"]["scheme"] == "bearer"
    for path in ("/healthz", "/readyz"):
        assert spec["paths"][path]["get"]["security"] == []
    assert spec["paths"]["/v1/chat/completions"]["post"]["security"] == [{"gatewayKey": []}]
    assert spec["paths"]["/v1/models"]["get"]["security"] == [{"gatewayKey": []}]


def test_errors_are_documented_in_the_one_error_shape(spec):
    schema = spec["components"]["schemas"]["Error"]
    assert set(schema["properties"]) == {"error"}
    mem0 = spec["components"]["schemas"]["Mem0Error"]
    assert set(mem0["properties"]) == {"detail", "error", "details"}
    tags = {operation["tags"][0] for path, _, operation in operations(spec) if is_mem0(path)}
    assert tags == {"mem0"}, "mem0's routes under a tag of their own"


def test_every_error_a_route_can_answer_is_declared_in_the_error_shape(spec):
    for path, method, operation in operations(spec):
        responses = operation["responses"]
        if is_mem0(path):  # mem0's routes answer in mem0's shape (docs/mem0.md)
            expected = {"400", "401", "403", "429", "502", "503"} | (
                {"404"} if "{" in path else set()
            )
            assert expected <= set(responses), f"{method.upper()} {path}"
            for code, response in responses.items():
                if code.startswith(("4", "5")):
                    assert response["$ref"].split("/")[-1].startswith("MEM0_"), (path, code)
            continue
        expected = {"401", "429", "503"} if path.startswith(("/api/", "/v1/")) else set()
        if path.startswith("/api/"):
            expected.add("403")
        if "{" in path and path.startswith("/api/"):
            expected.add("404")
        if method in ("post", "put") and path.startswith(("/api/", "/v1/")):
            expected |= {"400", "413"}
        assert expected <= set(responses), f"{method.upper()} {path}: {expected - set(responses)}"
        for code, response in responses.items():
            if code.startswith(("4", "5")):
                name = response["$ref"].rsplit("/", 1)[1]
                content = spec["components"]["responses"][name]["content"]
                assert content["application/json"]["schema"]["$ref"].endswith("/Error"), code
    assert "409" in spec["paths"]["/api/memory"]["post"]["responses"]
    assert "409" not in spec["paths"]["/api/keys"]["post"]["responses"]
    assert "504" in spec["paths"]["/v1/chat/completions"]["post"]["responses"]


def test_the_docs_page_loads_its_assets_from_this_server(client):
    page = client.get("/docs")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert "http://" not in html and "https://" not in html
    for asset in re.findall(r'(?:src|href)="(/docs/assets/[^"]+)"', html):
        with client.get(asset) as response:
            assert response.status_code == 200, asset
    assert "/openapi.json" in html


@pytest.mark.parametrize(
    ("path", "request_schema", "answer_schema", "required"),
    [
        ("/v1/chat/completions", "ChatRequest", "ChatCompletion", {"model", "messages"}),
        ("/v1/responses", "ResponseRequest", "ResponseObject", {"model", "input"}),
    ],
)
def test_the_gateway_declares_what_it_reads_and_what_it_answers(
    spec, path, request_schema, answer_schema, required
):
    operation = spec["paths"][path]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": f"#/components/schemas/{request_schema}"}
    assert set(spec["components"]["schemas"][request_schema]["required"]) == required
    answer = operation["responses"]["200"]["content"]
    assert answer["application/json"]["schema"] == {"$ref": f"#/components/schemas/{answer_schema}"}
    assert "text/event-stream" in answer
    listed = spec["paths"]["/v1/models"]["get"]["responses"]["200"]["content"]
    assert listed["application/json"]["schema"] == {"$ref": "#/components/schemas/ModelList"}


def test_the_gateway_key_is_a_declared_security_scheme(spec):
    schemes = spec["components"]["securitySchemes"]
    assert schemes["gatewayKey"] == {**schemes["gatewayKey"], "type": "http", "scheme": "bearer"}
    used = {
        name
        for path in spec["paths"].values()
        for operation in path.values()
        if isinstance(operation, dict)
        for requirement in operation.get("security", [])
        for name in requirement
    }
    assert used <= set(schemes)


def test_what_the_routes_refuse_the_spec_refuses_too(spec):
    """Schemathesis's finds: a field the route refuses when blank or empty says so."""
    schemas = spec["components"]["schemas"]
    assert schemas["ChatRequest"]["properties"]["model"]["pattern"]
    assert schemas["ChatRequest"]["properties"]["messages"]["minItems"] == 1
    assert schemas["ChatRequest"]["properties"]["n"]["minimum"] == 1
    url = re.compile(schemas["ProviderCreate"]["properties"]["baseUrl"]["pattern"])
    for taken in ("https://api.openai.com/v1", "http://127.0.0.1:11434/v1", "http://[::1]:80"):
        assert url.search(taken), taken
    for refused in (
        "\u0003#https://x",
        "http://[0]",
        "http://a:65536",
        "http://u@h",
        "http://a/?q",
    ):
        assert not url.search(refused), refused
    assert "pattern" in schemas["KeyCreate"]["properties"]["name"]
    changes = ("MemoryUpdate", "ProviderChange", "MemorySettingsUpdate", "QdrantSettingsUpdate")
    for change in changes:
        assert schemas[change]["minProperties"] == 1, change


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_every_base_url_the_spec_promises_the_guard_takes(spec, data):
    """Schemathesis sends what the pattern allows: the guard must not refuse any of it by its
    form (where it points, with local URLs allowed, is its own judgement)."""
    pattern = spec["components"]["schemas"]["ProviderCreate"]["properties"]["baseUrl"]["pattern"]
    url = data.draw(st.from_regex(pattern))
    check_base_url(url, allow_local=True, resolve=False)


def test_server_sent_events_are_declared_one_event_at_a_time(spec):
    stream = spec["paths"]["/v1/responses"]["post"]["responses"]["200"]["content"]
    event = stream["text/event-stream"]["schema"]
    assert event["required"] == ["data"] and set(event["properties"]) >= {"event", "data"}


def test_a_change_with_no_field_and_a_backfill_of_a_disabled_qdrant_are_refused(client, admin):
    for path in ("/api/settings/gateway", "/api/settings/memory", "/api/settings/qdrant"):
        answer = client.put(path, json={}, headers=admin)
        assert answer.status_code == 422, path
    answer = client.post("/api/settings/qdrant/backfill", headers=admin)
    assert answer.status_code == 409 and "not enabled" in answer.json["error"]["message"]
    assert client.post("/api/memory/summarize", headers=admin).status_code == 200


def test_the_spec_built_on_its_first_reads_is_whole_and_the_same_for_each(app):
    """The operations enter the spec when it is first read: many first readers at once
    each get the whole spec, every operation once."""
    barrier = threading.Barrier(4)

    def read():
        barrier.wait()
        return app.test_client().get("/openapi.json").json

    with ThreadPoolExecutor(4) as pool:
        specs = list(pool.map(lambda _: read(), range(4)))
    assert all(spec == specs[0] for spec in specs)
    ids = [operation["operationId"] for _, _, operation in operations(specs[0])]
    assert len(ids) == len(set(ids)) and "listMemories" in ids and "createChatCompletion" in ids
