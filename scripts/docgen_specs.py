"""Markdown reference pages of the spec models, from their JSON Schemas and their source.

A field's text is its schema ``description`` if it has one, else the comment written above it in
the model's source (``#: ...`` lines) or the docstring written under it. Types, defaults and
which fields are required come from the published JSON Schema, so a page describes the spec a
user writes (aliases such as ``cycle_target``, durations as text), not the stored form.
"""

from __future__ import annotations

import inspect
import json
import re
import typing
from typing import Any

from pydantic import BaseModel

_FIELD_LINE = re.compile(r"^\s{4}([a-z_][a-z0-9_]*)\s*:")


def nested_models(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """``model`` and every model its fields hold, by class name (their ``$defs`` keys)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in found.values():
                return
            found[tp.__name__] = tp
            # pydantic names a $def by its module too when two models share a name
            found[f"{tp.__module__}.{tp.__qualname__}".replace(".", "__")] = tp
            for field in tp.model_fields.values():
                visit(field.annotation)
        for arg in typing.get_args(tp):
            visit(arg)

    visit(model)
    return found


def source_notes(model: type[BaseModel]) -> dict[str, str]:
    """field name -> the ``#:`` comment above it or the docstring under it, in the class body."""
    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    notes: dict[str, str] = {}
    pending: list[str] = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#:"):
            pending.append(stripped[2:].strip())
            continue
        m = _FIELD_LINE.match(line)
        if m and m.group(1) in model.model_fields:
            text = " ".join(pending) or _docstring_after(lines, i)
            if text:
                notes[m.group(1)] = text
        pending = []
    return notes


def _docstring_after(lines: list[str], at: int) -> str:
    """The string literal that opens the statement after the field at ``at`` (an attribute
    docstring), read up to its closing quotes; empty when there is none."""
    for j in range(at + 1, min(at + 6, len(lines))):
        text = lines[j].strip()
        if text.startswith('"""'):
            body = [text[3:]]
            k = j
            while '"""' not in body[-1] and k + 1 < len(lines):
                k += 1
                body.append(lines[k].strip())
            return " ".join(body).split('"""')[0].strip()
        if _FIELD_LINE.match(lines[j]) or text.startswith(("@", "def ")):
            return ""
    return ""


def display_name(def_name: str) -> str:
    """A ``$defs`` name as a heading: ``Window (ops spec)`` for pydantic's
    ``orchestrator__contracts__ops_spec__Window`` (two models of one name)."""
    parts = def_name.split("__")
    return parts[-1] if len(parts) == 1 else f"{parts[-1]} ({parts[-2].replace('_', ' ')})"


def anchor(heading: str) -> str:
    """The id Python-Markdown's toc gives ``heading`` (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def md(text: str) -> str:
    """``text`` as Markdown: reST's double backticks become one, ``<`` outside code spans is
    escaped (so it is not taken for HTML)."""
    parts = text.replace("``", "`").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def type_text(prop: dict[str, Any]) -> str:
    """A JSON Schema property's type in words: ``string``, ``integer or string``, links for
    nested models (``[Stage](#stage)``)."""
    if "$ref" in prop:
        name = display_name(prop["$ref"].rsplit("/", 1)[-1])
        return f"[{name}](#{anchor(name)})"
    if "anyOf" in prop:
        kinds = [type_text(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(dict.fromkeys(kinds)) or "null"
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {type_text(prop.get('items', {}))}"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map of {type_text(prop['additionalProperties'])}"
    return str(kind)


def _field_line(name: str, prop: dict[str, Any], required: bool, note: str) -> str:
    bits = [f"- **`{name}`** ({type_text(prop)}"]
    if required:
        bits.append(", required")
    elif "default" in prop and prop["default"] not in (None, {}, [], ""):
        bits.append(f", default `{json.dumps(prop['default'])}`")
    bits.append(")")
    text = prop.get("description") or note
    return "".join(bits) + (f": {md(' '.join(text.split()))}" if text else "")


def model_section(
    name: str, schema: dict[str, Any], model: type[BaseModel] | None, level: str
) -> list[str]:
    """A heading, the model's docstring and one line per field."""
    out = [f"{level} {display_name(name)}", ""]
    doc = inspect.cleandoc(model.__doc__) if model is not None and model.__doc__ else ""
    for paragraph in doc.split("\n\n") if doc else []:
        out += [md(" ".join(paragraph.split())), ""]
    notes = source_notes(model) if model is not None else {}
    by_alias = (
        {(f.alias or n): n for n, f in model.model_fields.items()} if model is not None else {}
    )
    required = set(schema.get("required", []))
    for prop_name, prop in schema.get("properties", {}).items():
        note = notes.get(by_alias.get(prop_name, prop_name), "")
        out.append(_field_line(prop_name, prop, prop_name in required, note))
    return out + [""]


def spec_page(kind: str, what: str, model: type[BaseModel], schema: dict[str, Any]) -> str:
    """The reference page of one spec: its fields, then each nested model's, alphabetically."""
    models = nested_models(model)
    head = [
        f"# {what.capitalize()} (`{kind}`)",
        "",
        "Generated from the pydantic model by `scripts/gen_docs.py`; do not edit by hand.",
        f"The JSON Schema is [`{kind}.json`](../schemas/{kind}.json)"
        f" (also printed by `trainctl schema {kind}`). Unknown fields are refused.",
        "",
    ]
    body = model_section(model.__name__, schema, model, "##")
    for name, sub in sorted(schema.get("$defs", {}).items()):
        body += model_section(name, sub, models.get(name), "###")
    return "\n".join(head + body).rstrip() + "\n"
