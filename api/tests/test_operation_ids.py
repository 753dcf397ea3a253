"""The runtime API's OpenAPI operation ids name the functions of every generated client
(api/tests/test_sdk_live.py): they are its paths under /api/v1/, and must not move when the schema
serves other paths too (the MCP Registry API's /v0.1/ at the site's root)."""

from drf_spectacular.generators import SchemaGenerator


def test_the_runtime_apis_operation_ids_are_its_paths_under_api_v1():
    schema = SchemaGenerator().get_schema(request=None, public=True)
    ids = {
        path: operation["operationId"]
        for path, methods in schema["paths"].items()
        for operation in methods.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    assert ids["/api/v1/revision/"] == "revision_retrieve"
    assert ids["/api/v1/tools/{name}/"] == "tools_retrieve"
    assert ids["/api/v1/traces/"] == "traces_create"
    assert any(path.startswith("/v0.1/") for path in ids)  # served beside them
    runtime = [op for path, op in ids.items() if path.startswith("/api/v1/")]
    assert runtime and not any(op.startswith("api_v1") for op in runtime)
