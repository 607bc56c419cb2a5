"""Writes the JSON schemas of the models SWE-ReX's routes read and answer.

Usage: python swerex_models.py OUT

Reads the installed swe-rex package (swerex-remote's FastAPI app and the
runtime's pydantic models) and writes to OUT a JSON object:

  routes: path -> {method, requests: [{name, schema, order}], response: {name, schema}}
      requests as FastAPI reads the body (one model per discriminator tag,
      or the upload form), in the order of its OpenAPI document; the
      response is the model the runtime method of the same name returns;
      order lists a request's fields as the model declares them (pydantic
      reports bad fields in that order)
  errors: name -> schema, for the 422 detail item and _ExceptionTransfer

A response's "required" lists every property: model_dump writes every
field, so every field is always in the answer.
"""

import asyncio
import json
import sys
import typing

from fastapi.routing import APIRoute
from swerex import server
from swerex.runtime import abstract


def request_models(op, components):
    """The models of an operation's body."""
    body = op.get("requestBody")
    if body is None:
        return []
    (content,) = body["content"].values()
    schema = content["schema"]
    refs = [s["$ref"] for s in schema.get("oneOf", [])] or [schema["$ref"]]
    out = []
    for ref in refs:
        name = ref.rsplit("/", 1)[-1]
        model = getattr(abstract, name, None)
        # The runtime's model has the defaults FastAPI's copy leaves out
        # (None); the upload form exists only in FastAPI's document.
        schema = model.model_json_schema() if model else components[name]
        out.append({"name": name, "schema": schema, "order": list(schema["properties"])})
    return out


def response_model(path):
    if path == "/":
        answer = asyncio.run(server.root())
        props = {k: {"type": "string"} for k, v in answer.items() if isinstance(v, str)}
        assert len(props) == len(answer), answer
        return {"name": "root", "schema": {"properties": props, "required": list(props)}}
    method = getattr(abstract.AbstractRuntime, path.strip("/"))
    ret = typing.get_type_hints(method)["return"]
    return {"name": ret.__name__, "schema": dumped(ret)}


def dumped(model):
    schema = model.model_json_schema(mode="serialization")
    schema["required"] = list(schema.get("properties", {}))
    return schema


def main():
    doc = server.app.openapi()
    components = doc["components"]["schemas"]
    routes = {}
    for route in server.app.routes:
        if not isinstance(route, APIRoute):
            continue
        (method,) = route.methods
        op = doc["paths"][route.path][method.lower()]
        routes[route.path] = {
            "method": method,
            "requests": request_models(op, components),
            "response": response_model(route.path),
        }
    errors = {
        "ValidationError": components["ValidationError"],
        "_ExceptionTransfer": dumped(abstract._ExceptionTransfer),
    }
    with open(sys.argv[1], "w") as f:
        json.dump({"routes": routes, "errors": errors}, f, indent=1)


if __name__ == "__main__":
    main()
