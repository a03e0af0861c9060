"""The one loader for every spec file (train, bulk operation): YAML or JSON into a pydantic model.

Versions are kept exactly as written. YAML 1.1 would read ``6.10`` as the float 6.1, ``010`` as
8, ``0x10`` as 16, ``1:30`` as 90 and ``1e3`` as 1000.0; here every scalar that YAML would
implicitly type as a number (or a timestamp) stays its original text, and JSON numbers stay
their text too. Pydantic's lax mode still turns ``domain_size: 8`` (the text ``"8"``) into the
int 8, so only fields that are text (versions, names) see the difference. Booleans and null are
unchanged; a version that arrives as a boolean is refused by ``check_version`` with a request
to quote it.

Every problem is one ``SpecError`` (a ValueError): a one-line message naming the dotted field
(``targets.os: ...``, ``budget.max_unavailable: ...``) or, for a file that cannot be read or
parsed, the file. This module sits at the bottom: it imports only yaml, json and pydantic.

A spec document is at most ``MAX_SPEC_BYTES`` (4 MiB) of UTF-8: a larger file or text is refused
before it is parsed, with a SpecError naming the file.
"""

from __future__ import annotations

import json
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ValidationError
from yaml.constructor import ConstructorError

from orchestrator.contracts.errors import BadSpec

M = TypeVar("M", bound=BaseModel)
Format = Literal["yaml", "json"]

__all__ = [
    "MAX_SPEC_BYTES",
    "SpecError",
    "SpecLoader",
    "describe_validation",
    "load_spec",
    "parse_spec",
]

#: The largest spec document accepted, in bytes of UTF-8 (4 MiB).
MAX_SPEC_BYTES = 4 * 1024 * 1024


class SpecError(BadSpec, ValueError):
    """A spec that cannot be used; ``field`` is the dotted field at fault, None for the file.

    A ``BadSpec`` (permanent, kind ``BadSpec``) to a retry policy, a ValueError to a caller.
    """

    @property
    def message(self) -> str:
        return str(self.args[0])


# ------------------------------------------------------------------------------------- YAML
_MERGE = "tag:yaml.org,2002:merge"
#: Implicit tags whose scalars stay text: YAML 1.1 numbers (incl. octal ``010``, hex ``0x10``,
#: sexagesimal ``1:30``, ``.inf``), timestamps (``2024-01-15`` is a plausible BIOS version;
#: pydantic parses datetimes from text) and the ``=`` value key.
_TEXT_TAGS = frozenset(
    {
        "tag:yaml.org,2002:int",
        "tag:yaml.org,2002:float",
        "tag:yaml.org,2002:timestamp",
        "tag:yaml.org,2002:value",
    }
)


class SpecLoader(yaml.SafeLoader):
    """SafeLoader that keeps number-looking scalars as written and refuses duplicate keys."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != _MERGE:
                if key_node.value in seen:
                    raise ConstructorError(
                        None, None, f"duplicate key {key_node.value!r}", key_node.start_mark
                    )
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


SpecLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in _TEXT_TAGS]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _yaml(text: str, what: str, source: str) -> object:
    try:
        return yaml.load(text, Loader=SpecLoader)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        why = _one_line(" ".join(p for p in (err.context, err.problem) if p)) or "syntax error"
        raise SpecError(f"{what}: {source} is not valid YAML{where}: {why}") from None
    except yaml.YAMLError as err:
        raise SpecError(f"{what}: {source} is not valid YAML: {_one_line(str(err))}") from None


# ------------------------------------------------------------------------------------- JSON
def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _json(text: str, what: str, source: str) -> object:
    try:
        return json.loads(
            text,
            parse_float=str,
            parse_int=str,
            parse_constant=str,
            object_pairs_hook=_no_duplicates,
        )
    except json.JSONDecodeError as err:
        raise SpecError(
            f"{what}: {source} is not valid JSON (line {err.lineno}, column {err.colno}): {err.msg}"
        ) from None
    except ValueError as err:  # a duplicate key
        raise SpecError(f"{what}: {source} is not valid JSON: {err}") from None


# ------------------------------------------------------------------------------- validation
_HEAD = re.compile(r"^([A-Za-z_][\w.\-]*): (.*)$", re.S)


def _model_of(annotation: object) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``X``, ``X | None``, ``Annotated[X, ...]``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _model_of(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_of(arg)
            if found is not None:
                return found
    return None


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None:
            return None
        fields = {(f.alias or name): f for name, f in current.model_fields.items()}
        fields.update(current.model_fields)
        info = fields.get(str(part))
        current = None if info is None else _model_of(info.annotation)
    return current


def _field_names(model: type[BaseModel] | None) -> list[str]:
    if model is None:
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _split(loc: str, msg: str) -> tuple[str | None, str]:
    """(dotted field, reason) from pydantic's location and a message that may name a field."""
    m = _HEAD.match(msg)
    if m:
        head, rest = m.groups()
        if not loc or head.startswith(loc + "."):
            return head, rest
        if head == loc or loc.endswith("." + head):
            return loc, rest
        if "." not in head:  # a key inside a mapping field: targets -> targets.os
            return f"{loc}.{head}", rest
    if not loc:
        return None, msg
    last = loc.rsplit(".", 1)[-1]
    return loc, msg.removeprefix(last + " ") if msg.startswith(last + " ") else msg


def _reason(error: Any, model: type[BaseModel]) -> str:
    kind = error["type"]
    if kind == "extra_forbidden":
        known = _field_names(_model_at(model, tuple(error["loc"][:-1])))
        return "unknown field" + (f" (known: {', '.join(known)})" if known else "")
    if kind == "missing":
        return "required field is missing"
    msg = str(error["msg"]).removeprefix("Value error, ")
    value = error.get("input")
    if kind != "value_error" and isinstance(value, str | int | float | bool | None):
        msg = f"{msg} (got {_shown(value)})"
    return msg


#: The most of a refused value an error quotes: enough to recognise it, never a wall of text.
MAX_QUOTED = 60


def _shown(value: str | int | float | bool | None) -> str:
    """``value`` as an error quotes it: its repr, a long text cut with its length said."""
    if not isinstance(value, str) or len(value) <= MAX_QUOTED:
        return repr(value)
    return f"{value[:MAX_QUOTED]!r}... ({len(value):,} characters)"


def describe_validation(err: ValidationError, model: type[BaseModel]) -> SpecError:
    """One SpecError for a ValidationError: each problem as ``field: reason``, on one line."""
    parts: list[str] = []
    first: str | None = None
    for error in err.errors(include_url=False):
        loc = ".".join(str(p) for p in error["loc"])
        field, reason = _split(loc, _reason(error, model))
        if first is None:
            first = field
        parts.append(_one_line(f"{field}: {reason}" if field else reason))
    return SpecError("; ".join(dict.fromkeys(parts)), first)


# ---------------------------------------------------------------------------------- loading
def _too_big(what: str, source: str, size: int) -> SpecError:
    return SpecError(
        f"{what}: {source} is {size:,} bytes, over the {MAX_SPEC_BYTES / 2**20:g} MiB limit "
        f"for a spec ({MAX_SPEC_BYTES:,} bytes)"
    )


def _format_of(path: Path) -> Format | None:
    suffix = path.suffix.lower()
    if suffix == ".json":
        return "json"
    if suffix in (".yaml", ".yml"):
        return "yaml"
    return None


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {_one_line(value)[:40]!r}"
    return f"a {type(value).__name__}"


def _parse(text: str, what: str, source: str, fmt: Format | None) -> object:
    data: object
    if fmt == "json":
        data = _json(text, what, source)
    elif fmt == "yaml":
        data = _yaml(text, what, source)
    elif text.lstrip().startswith(("{", "[")):
        try:
            data = _json(text, what, source)
        except SpecError as json_err:
            try:
                data = _yaml(text, what, source)
            except SpecError:
                raise json_err from None
    else:
        data = _yaml(text, what, source)
    return data


def parse_spec(
    text: str,
    model: type[M],
    *,
    what: str,
    source: str = "the input",
    fmt: Format | None = None,
) -> M:
    """Parse YAML or JSON text into ``model``; SpecError naming the field when it does not fit.

    Without ``fmt``, text that opens with ``{`` is tried as JSON first and as YAML (a flow
    mapping) when that fails; anything else is YAML (of which JSON is mostly a subset).
    """
    if len(text) > MAX_SPEC_BYTES // 4:  # only then can it hold more bytes than the limit
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_SPEC_BYTES:
            raise _too_big(what, source, size)
    if not text.strip():
        raise SpecError(f"{what}: {source} is empty")
    try:
        data = _parse(text, what, source, fmt)
    except RecursionError:
        raise _too_deep(what, source) from None
    if data is None:
        raise SpecError(f"{what}: {source} is empty")
    if _depth_over(data, MAX_SPEC_DEPTH):
        raise _too_deep(what, source)
    if not isinstance(data, dict):
        fields = ", ".join(_field_names(model)[:4])
        raise SpecError(
            f"{what}: {source} must hold a mapping of fields ({fields}, ...), not {_kind(data)}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise describe_validation(err, model) from None
    except RecursionError:
        raise _too_deep(what, source) from None


#: The deepest nesting of lists and mappings a spec may have (a real one has under 10 levels).
MAX_SPEC_DEPTH = 64


def _too_deep(what: str, source: str) -> SpecError:
    return SpecError(
        f"{what}: {source} nests lists or mappings over {MAX_SPEC_DEPTH} levels deep; "
        "no spec field is that deep"
    )


def _depth_over(data: object, limit: int) -> bool:
    """Whether ``data`` nests lists/mappings deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    seen: set[int] = set()  # YAML aliases share nodes: each is walked once
    while stack:
        item, depth = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            children: list[object] = [*item.keys(), *item.values()]
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def load_spec(source: Path | str, model: type[M], *, what: str) -> M:
    """Read a spec file (``.yaml``, ``.yml``, ``.json``, or told apart by content) into ``model``.

    ``source`` is the file's path. Raises SpecError (a ValueError, one line) naming the field,
    or the file when it cannot be read or parsed.
    """
    path = Path(source)
    try:
        size = path.stat().st_size
        if size > MAX_SPEC_BYTES:  # refused before it is read
            raise _too_big(what, str(path), size)
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(f"{what}: no such file {path}") from None
    except IsADirectoryError:
        raise SpecError(f"{what}: {path} is a directory, not a file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise SpecError(f"{what}: cannot read {path}: {_one_line(str(err))}") from None
    return parse_spec(text, model, what=what, source=str(path), fmt=_format_of(path))
