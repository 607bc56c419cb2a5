"""msb.types against docs/openapi.json, the daemon's own description of its
wire types: every dataclass has the fields, optionality and types of its
schema, and every schema the client decodes (the answers of the routes
msb._api calls, and the error body) has a dataclass."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import os
import typing
from typing import Any, Dict, Iterator, List, Optional, Tuple

import msb._api
import msb.types as t

from conftest import REPO

DOC = json.load(open(os.path.join(REPO, "docs", "openapi.json"), encoding="utf-8"))
SCHEMAS: Dict[str, Any] = DOC["components"]["schemas"]
SCALARS = {"string": str, "integer": int, "number": float, "boolean": bool}


def _classes() -> List[type]:
    return [c for _, c in inspect.getmembers(t, inspect.isclass)
            if dataclasses.is_dataclass(c) and c.__module__ == t.__name__]


def _ref(schema: Dict[str, Any]) -> Optional[str]:
    ref = schema.get("$ref", "")
    return ref.rsplit("/", 1)[-1] if ref else None


def _optional(hint: Any) -> Tuple[bool, Any]:
    """Whether hint is Optional[X], and X."""
    if typing.get_origin(hint) is typing.Union:
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return len(inner) < len(typing.get_args(hint)), inner[0]
    return False, hint


def _is_raw_object(hint: Any) -> bool:
    """Dict[str, Any]: a JSON object the client keeps undecoded."""
    return typing.get_origin(hint) in (dict, Dict) and typing.get_args(hint) == (str, Any)


def _mismatch(hint: Any, schema: Dict[str, Any]) -> str:
    """Why hint cannot hold values of schema ("" when it can)."""
    name = _ref(schema)
    if name:
        if dataclasses.is_dataclass(hint):
            return "" if hint.__name__ == name else f"{hint.__name__} is not {name}"
        if _is_raw_object(hint) and SCHEMAS[name].get("type") == "object":
            return ""
        return f"{hint} is not the dataclass {name}"
    typ = schema.get("type")
    if typ in SCALARS:
        return "" if hint is SCALARS[typ] else f"{hint} is not {typ}"
    if typ == "array":
        if typing.get_origin(hint) not in (list, List):
            return f"{hint} is not an array"
        return _mismatch(typing.get_args(hint)[0], schema["items"])
    if typ == "object":
        if "additionalProperties" in schema:
            if typing.get_origin(hint) not in (dict, Dict) or typing.get_args(hint)[0] is not str:
                return f"{hint} is not a map"
            return _mismatch(typing.get_args(hint)[1], schema["additionalProperties"])
        return "" if _is_raw_object(hint) else f"{hint} is not a free-form object"
    return f"schema {schema} unknown to this test"


def _drift(cls: type) -> Iterator[str]:
    schema = SCHEMAS.get(cls.__name__)
    if schema is None:
        yield f"{cls.__name__}: no schema of that name"
        return
    props, required = schema.get("properties", {}), set(schema.get("required", []))
    hints = typing.get_type_hints(cls, vars(t))
    fields = {f.metadata.get("json", f.name): f for f in dataclasses.fields(cls)}
    for name in sorted(set(props) - set(fields)):
        yield f"{cls.__name__}: lacks {name}"
    for name in sorted(set(fields) - set(props)):
        yield f"{cls.__name__}.{name}: not in the schema"
    for name in sorted(set(fields) & set(props)):
        optional, inner = _optional(hints[fields[name].name])
        nullable = bool(props[name].get("nullable"))
        if optional and name in required and not nullable:
            yield f"{cls.__name__}.{name}: Optional, but the daemon always sends it"
        if nullable and not optional:
            yield f"{cls.__name__}.{name}: the daemon may send null, the type is not Optional"
        why = _mismatch(inner, props[name])
        if why:
            yield f"{cls.__name__}.{name}: {why}"


def test_every_type_matches_its_schema():
    problems = [p for cls in _classes() for p in _drift(cls)]
    assert not problems, "msb.types drifted from docs/openapi.json:\n  " + "\n  ".join(problems)


# The routes the client calls, read from msb._api's source.


def _path(node: ast.expr) -> str:
    """The path of a Call's second argument, each interpolation as {}."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp):  # "/v1/x" + query
        return _path(node.left)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_files":  # _files(sid, sub, ...)
        return "/v1/sandboxes/{}/files" + node.args[1].value
    raise AssertionError(f"msb._api: a path this test cannot read: {ast.dump(node)}")


def _calls() -> Iterator[Tuple[str, str, ast.expr]]:
    tree = ast.parse(inspect.getsource(msb._api))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Call":
            yield node.args[0].value, _path(node.args[1]).split("?")[0], node.args[2]


def _operation(method: str, path: str) -> Dict[str, Any]:
    want = path.split("/")
    for p, ops in DOC["paths"].items():
        segs = p.split("/")
        if len(segs) == len(want) and all(a == b or (a.startswith("{") and b == "{}") for a, b in zip(segs, want)):
            if method.lower() in ops:
                return ops[method.lower()]
    raise AssertionError(f"msb._api calls {method} {path}, which docs/openapi.json does not have")


def _answer(op: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The schema of an operation's success answer (None: no body)."""
    for status, resp in op["responses"].items():
        if status.startswith("2"):
            for media in resp.get("content", {}).values():
                return media.get("schema")
    return None


def _decoded(decoder: ast.expr, answer: Optional[Dict[str, Any]]) -> Iterator[Tuple[str, Dict[str, Any]]]:
    """What a decoder reads of the answer: (where, schema) pairs."""
    if answer and "oneOf" in answer:  # either type (a create with count answers a list)
        for alt in answer["oneOf"]:
            try:
                got = list(_decoded(decoder, alt))
            except (AssertionError, KeyError):
                continue
            yield from got
            return
        raise AssertionError(f"{ast.unparse(decoder)} decodes none of {answer['oneOf']}")
    ref = _ref(answer or {})
    src = ast.unparse(decoder)
    if isinstance(decoder, ast.Call) and decoder.func.id == "_obj":  # _obj(t.X): the whole answer as X
        assert ref == decoder.args[0].attr, f"{src} decodes {ref}"
        yield src, answer
    elif isinstance(decoder, ast.Call) and decoder.func.id == "_field":  # _field("k"): one member
        key = decoder.args[0].value
        assert ref and key in SCHEMAS[ref]["properties"], f"{src}: {ref} has no {key}"
        yield f"{ref}.{key}", SCHEMAS[ref]["properties"][key]
    elif isinstance(decoder, ast.Lambda):  # [t.from_json(t.X, x) for x in decode_json(b)["k"]]
        key = next(n.slice.value for n in ast.walk(decoder) if isinstance(n, ast.Subscript))
        cls = next(n.args[0].attr for n in ast.walk(decoder) if isinstance(n, ast.Call)
                   and getattr(n.func, "attr", "") == "from_json")
        member = SCHEMAS[ref]["properties"][key]
        assert member.get("type") == "array" and _ref(member["items"]) == cls, f"{src}: {ref}.{key} is not [{cls}]"
        yield f"{ref}.{key}", member
    elif answer is not None:  # _none, _raw: a stream of events, or bytes
        yield src, answer


def _refs(schema: Dict[str, Any]) -> Iterator[str]:
    if _ref(schema):
        yield _ref(schema)
    for sub in ("items", "additionalProperties"):
        if isinstance(schema.get(sub), dict):
            yield from _refs(schema[sub])


def test_every_decoded_schema_has_a_type():
    classes = {c.__name__ for c in _classes()}
    calls = list(_calls())
    assert len(calls) > 20, "the scan of msb._api found too few routes"
    missing = set()
    for method, path, decoder in calls:
        op = _operation(method, path)
        decoded = list(_decoded(decoder, _answer(op)))
        # Every error answer is an ErrorBody, which msb.errors reads.
        decoded += [("error", r["content"]["application/json"]["schema"]["properties"]["error"]
                     if "properties" in r["content"]["application/json"]["schema"]
                     else SCHEMAS[_ref(r["content"]["application/json"]["schema"])]["properties"]["error"])
                    for s, r in op["responses"].items() if not s.startswith("2") and "content" in r]
        for where, schema in decoded:
            missing |= {f"{name} ({method} {path}: {where})" for name in _refs(schema) if name not in classes}
    assert not missing, "schemas the client decodes without a dataclass in msb.types:\n  " + "\n  ".join(sorted(missing))
