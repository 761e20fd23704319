"""The OpenAPI document names each schema once: a component's `title` (msgspec's, from its
Struct) is the name the document files it under and refers to it by, so a client generated
from the document, or a person reading it, meets one name for it (the error body was titled
`ErrorBody` under `Error`)."""

from __future__ import annotations

from tests.conftest import ApiClient


async def test_each_schema_is_titled_by_its_name(api: ApiClient) -> None:
    document = await (await api.raw.get("/api/openapi.json")).json()
    schemas = document["components"]["schemas"]
    titled = {name: schema["title"] for name, schema in schemas.items() if "title" in schema}
    assert {name: title for name, title in titled.items() if title != name} == {}
    assert titled["Error"] == "Error"
    answers = document["paths"]["/api/operator/board"]["get"]["responses"]
    assert answers["401"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Error"
    }
