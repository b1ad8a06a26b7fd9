"""Read instance files: YAML safely, includes confined to the instance's folder, every
schema error reported at once with its file, field path, bad value and what is allowed.

Reading a file (:func:`read_yaml`) refuses, each with an :class:`~optnet.errors.InputError`:
missing/unreadable/non-regular files, files over ``MAX_FILE_BYTES``, non-UTF-8 bytes, empty
files, YAML syntax errors, duplicate mapping keys, nesting deeper than ``MAX_DEPTH``, recursive
aliases, alias expansion ("billion laughs") beyond ``MAX_ALIAS_NODES`` extra nodes, numeric
literals longer than ``MAX_NUMBER_CHARS`` characters, and a top level that is not a mapping.
Only the YAML safe loader is used (no Python object tags).

Includes: ``topology:`` and ``workload:`` may be a path to a YAML file holding that section,
relative to the including file. The path may not be absolute and may not resolve (after
following ``..`` and symlinks) outside the instance's folder; an included file holds the section
itself (includes do not nest), so a file including itself or an instance file is refused with
a message naming the cycle.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import os
import reprlib
import stat
import types
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from optnet.errors import InputError, Problem, input_error
from optnet.presets import apply_presets
from optnet.safeio import read_bytes
from optnet.schema import Cluster, InstanceFile, Workload

MAX_DEPTH = 64
"""Deepest nesting of mappings and lists (a valid instance needs fewer than 10 levels)."""
MAX_ALIAS_NODES = 1_000_000
"""Most nodes that YAML aliases (``*name``) may add to a document when expanded."""
MAX_NUMBER_CHARS = 1000
"""Longest numeric literal (anything longer is far outside every allowed range)."""
MAX_PROBLEMS = 100
"""Problems listed per error; the rest are counted."""

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_repr = reprlib.Repr()
_repr.maxstring = 50
_repr.maxother = 50
_repr.maxlist = _repr.maxtuple = _repr.maxdict = _repr.maxset = 4
_repr.maxlevel = 2


def _short(value: Any) -> str:
    text = _repr.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------------------------
# reading one file


class _Bad(Exception):
    """A fatal problem found while scanning a YAML document."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
        self.message = message


class _Dups(_Bad):
    """Duplicate mapping keys (not fatal for the scan, all reported together)."""

    def __init__(self, items: list[tuple[str, str]]):
        super().__init__(items[0][0], items[0][1])
        self.items = items


def _where(mark: Any) -> str:
    return f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""


def _read(path: Path, name: str | None = None) -> tuple[Any, str]:
    """Read and parse one YAML file; return (data, sha256 of its bytes)."""
    name = str(path) if name is None else name
    raw = read_bytes(path, "a YAML file", name)
    return _parse(raw, name), hashlib.sha256(raw).hexdigest()


def _os_reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _parse(raw: bytes, name: str) -> Any:
    body = raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body[: exc.start].count(b"\n") + 1
        col = exc.start - (body.rfind(b"\n", 0, exc.start) + 1) + 1
        offset = exc.start + len(raw) - len(body)
        raise input_error(
            name,
            "",
            f"not UTF-8 text: byte 0x{body[exc.start]:02x} at line {line}, column {col} "
            f"(byte offset {offset}); save the file as UTF-8",
        ) from None
    if not text.strip():
        raise input_error(name, "", "file is empty; expected a YAML mapping")
    try:
        _scan(text)
        data = yaml.load(text, Loader=_Loader)  # a safe loader (C or Python)
    except _Dups as dups:
        raise InputError([Problem(name, f, m) for f, m in dups.items]) from None
    except _Bad as bad:
        raise input_error(name, bad.field, bad.message) from None
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise input_error(
            name,
            "",
            f"character #x{exc.character:04x} at line {line}, column {col} is not allowed in "
            "YAML (control characters other than tab and newline are not allowed)",
        ) from None
    except yaml.MarkedYAMLError as exc:
        problem = exc.problem or "invalid YAML"
        if exc.context:
            problem = f"{exc.context}: {problem}"
        raise input_error(name, "", f"invalid YAML: {problem}{_where(exc.problem_mark)}") from None
    except yaml.YAMLError as exc:
        raise input_error(name, "", f"invalid YAML: {exc}") from None
    except (RecursionError, MemoryError):
        raise input_error(name, "", "YAML document is too deeply nested or too large") from None
    except (ValueError, OverflowError, TypeError) as exc:  # e.g. a timestamp like 2024-13-45
        raise input_error(name, "", f"invalid YAML value: {str(exc)[:200]}") from None
    if data is None:
        raise input_error(name, "", "file has no content (only comments?); expected a YAML mapping")
    if not isinstance(data, dict):
        raise input_error(
            name, "", f"expected a YAML mapping (key: value lines) at top level, got {_kind(data)}"
        )
    return data


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {_short(value)}"
    return f"{type(value).__name__} {_short(value)}"


_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}


def _scan(text: str) -> None:
    """Walk the YAML event stream once, before anything is built, and refuse documents that
    would be expensive or surprising to construct: deep nesting, recursive or exploding
    aliases, absurdly long numbers, and duplicate keys (PyYAML silently keeps the last)."""
    loader = _Loader(text)
    resolver = yaml.resolver.Resolver()
    # frame: [is_mapping, expanded size, anchor, keys seen, at_key, index, current key]
    stack: list[list] = []
    sizes: dict[str, int] = {}  # closed anchor -> expanded node count
    open_anchors: set[str] = set()
    alias_extra = 0
    duplicates: list[tuple[str, str]] = []

    def path() -> str:
        parts: list[Any] = []
        for f in stack:
            if f[0]:
                if not f[4]:
                    parts.append(f[6])
            else:
                parts.append(f[5])
        return _field_path(tuple(parts))

    def child_done(size: int) -> None:
        if stack:
            f = stack[-1]
            f[1] += size
            if f[0]:
                f[4] = not f[4]
            else:
                f[5] += 1

    try:
        while loader.check_event():
            ev = loader.get_event()
            if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                if stack and stack[-1][0] and stack[-1][4]:
                    stack[-1][6] = "<complex key>"
                if len(stack) >= MAX_DEPTH:
                    raise _Bad(
                        path(), f"nested more than {MAX_DEPTH} levels deep{_where(ev.start_mark)}"
                    )
                if ev.anchor:
                    open_anchors.add(ev.anchor)
                stack.append(
                    [isinstance(ev, yaml.MappingStartEvent), 1, ev.anchor, set(), True, 0, None]
                )
            elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                f = stack.pop()
                if f[2]:
                    sizes[f[2]] = f[1]
                    open_anchors.discard(f[2])
                child_done(f[1])
            elif isinstance(ev, yaml.ScalarEvent):
                if stack and stack[-1][0] and stack[-1][4]:  # a mapping key
                    f = stack[-1]
                    if ev.value in f[3] and ev.value != "<<":
                        duplicates.append(
                            (path(), f"duplicate key {ev.value!r}{_where(ev.start_mark)}")
                        )
                    f[3].add(ev.value)
                    f[6] = ev.value
                if len(ev.value) > MAX_NUMBER_CHARS and ev.implicit[0]:
                    tag = resolver.resolve(yaml.ScalarNode, ev.value, (True, False))
                    if tag in _NUMBER_TAGS:
                        raise _Bad(
                            path(),
                            f"number with {len(ev.value)} characters{_where(ev.start_mark)} is "
                            f"too large; numbers may have at most {MAX_NUMBER_CHARS}",
                        )
                if ev.anchor:
                    sizes[ev.anchor] = 1
                child_done(1)
            elif isinstance(ev, yaml.AliasEvent):
                if ev.anchor in open_anchors:
                    raise _Bad(
                        path(),
                        f"alias *{ev.anchor}{_where(ev.start_mark)} refers to a value that "
                        "contains it (a recursive structure); not allowed",
                    )
                if ev.anchor not in sizes:
                    raise _Bad(
                        path(),
                        f"alias *{ev.anchor}{_where(ev.start_mark)} has no "
                        f"anchor &{ev.anchor} before it",
                    )
                size = sizes[ev.anchor]
                alias_extra += size - 1
                if alias_extra > MAX_ALIAS_NODES:
                    raise _Bad(
                        path(),
                        f"YAML aliases{_where(ev.start_mark)} expand to more than "
                        f"{MAX_ALIAS_NODES} extra values (an alias bomb?); write the data out "
                        "or use fewer aliases",
                    )
                if stack and stack[-1][0] and stack[-1][4]:
                    stack[-1][6] = f"*{ev.anchor}"
                child_done(size)
            elif isinstance(ev, yaml.DocumentEndEvent):
                stack.clear()
    finally:
        dispose = getattr(loader, "dispose", None)
        if dispose is not None:
            dispose()
    if duplicates:
        raise _Dups(duplicates)


def read_yaml(path: Path) -> Any:
    """Parse one YAML file with the safe loader; any failure is an :class:`InputError`.

    Returns the top-level mapping (a ``dict``).
    """
    return _read(Path(path))[0]


# --------------------------------------------------------------------------------------------
# turning pydantic errors into problems


def _field_path(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _unwrap(tp: Any) -> Any:
    while get_origin(tp) is Annotated:
        tp = get_args(tp)[0]
    return tp


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _match_branch(args: list[Any], label: str) -> Any:
    for a in args:
        u = _unwrap(a)
        if _is_model(u) and u.__name__ == label:
            return a
        if get_origin(u) is list and label.startswith("list["):
            return a
        if u in (int, float, str, bool) and label.rsplit("-", 1)[-1] == u.__name__:
            return a
        if get_origin(u) is Literal and label.startswith("literal["):
            return a
    return None


def _walk(model: type[BaseModel], loc: tuple[Any, ...]):
    """Follow a pydantic error location through the schema.

    Returns ``(parts, branches, owner, expected)``: the user-visible path (union branch labels
    such as ``'list[Rack]'`` removed), the union branches taken as ``(path so far, label,
    union type)``, the model the last path part is a field of (or None) and the type expected
    at the end.
    """
    tp: Any = model
    parts: list[Any] = []
    branches: list[tuple[tuple[Any, ...], str, Any]] = []
    owner = None
    for item in loc:
        tp = _unwrap(tp)
        if _is_union(tp):
            args = [a for a in get_args(tp) if a is not type(None)]
            if len(args) > 1:
                if isinstance(item, str):
                    branches.append((tuple(parts), item, tp))
                    tp = _match_branch(args, item)
                    continue
                tp = None
            else:
                tp = _unwrap(args[0]) if args else None
        if _is_model(tp):
            owner = tp
            field = tp.model_fields.get(item) if isinstance(item, str) else None
            tp = _field_type(field) if field is not None else None
        elif get_origin(tp) is list:
            owner = None
            tp = get_args(tp)[0]
        else:
            owner, tp = None, None
        parts.append(item)
    return tuple(parts), branches, owner, tp


def _field_type(field: Any) -> Any:
    if field.metadata:
        return Annotated[(field.annotation, *field.metadata)]
    return field.annotation


def _bounds(tp: Any) -> str:
    if get_origin(tp) is not Annotated:
        return ""
    lo = hi = ""
    for m in get_args(tp)[1:]:
        for meta in getattr(m, "metadata", None) or [m]:
            if getattr(meta, "ge", None) is not None:
                lo = f">= {meta.ge}"
            if getattr(meta, "gt", None) is not None:
                lo = f"> {meta.gt}"
            if getattr(meta, "le", None) is not None:
                hi = f"<= {meta.le}"
            if getattr(meta, "lt", None) is not None:
                hi = f"< {meta.lt}"
    both = " and ".join(x for x in (lo, hi) if x)
    return f" {both}" if both else ""


def _describe(tp: Any) -> str:
    """What a value of type ``tp`` looks like, for messages ("an integer >= 1 and <= 4096")."""
    u = _unwrap(tp)
    if _is_union(u):
        alts = [_describe(a) for a in get_args(u) if a is not type(None)]
        if type(None) in get_args(u):
            alts.append("null")
        return " or ".join(alts)
    if _is_model(u):
        return f"a mapping with fields {', '.join(u.model_fields)}"
    if get_origin(u) is list:
        return "a list"
    if get_origin(u) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(u))
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    if u in names:
        return names[u] + _bounds(tp)
    return "a value of the documented type"


_TYPE_MISMATCH = {
    "model_type",
    "model_attributes_type",
    "dict_type",
    "list_type",
    "int_type",
    "int_parsing",
    "int_from_float",
    "float_type",
    "float_parsing",
    "string_type",
    "bool_type",
    "bool_parsing",
    "literal_error",
    "is_instance_of",
}


def _problem(err: dict, parts: tuple, owner: Any, expected: Any, file: str, prefix: str) -> Problem:
    kind = err["type"]
    if kind == "invalid_key":
        parts = (*parts[:-1], str(parts[-1])) if parts else parts
    field = _field_path(parts)
    if prefix:
        field = prefix + ("." + field if field else "")
    got = f" (got {_short(err.get('input'))})"
    if kind == "extra_forbidden":
        key = parts[-1] if parts else "?"
        allowed = list(owner.model_fields) if owner is not None else []
        hint = difflib.get_close_matches(str(key), allowed, n=1)
        msg = f"unknown field {key!r}"
        if hint:
            msg += f" (did you mean {hint[0]!r}?)"
        if allowed:
            msg += f"; allowed fields here: {', '.join(allowed)}"
    elif kind == "missing":
        msg = "required field is missing"
        if expected is not None:
            msg += f"; expected {_describe(expected)}"
    elif kind == "invalid_key":
        msg = f"mapping keys must be text; got the key {_short(err.get('input'))}"
    elif kind in ("model_type", "model_attributes_type", "dict_type") and expected is not None:
        msg = f"expected {_describe(expected)}{got}"
    elif kind in ("value_error", "assertion_error") and isinstance(err.get("input"), dict):
        msg = err["msg"].removeprefix("Value error, ")
    else:
        msg = err["msg"] + got
    return Problem(file, field, msg)


def _problems(
    err: ValidationError, model: type[BaseModel], file: str, prefix: str
) -> list[Problem]:
    walked = [(e, *_walk(model, tuple(e["loc"]))) for e in err.errors()]
    return [_problem(e, p, o, x, file, prefix) for e, p, _b, o, x in _resolve(walked, 0)]


def _resolve(walked: list, level: int) -> list:
    """For each union a value failed, keep only the errors of the branch that matches the
    value's shape (a list for ``list[Rack]``, a mapping for ``RackGrid``); if no branch
    matches, replace the branches' errors by one "expected A or B (got X)" error."""
    out: list = []
    groups: dict[tuple, dict[str, list]] = {}
    for w in walked:
        branches = w[2]
        if len(branches) > level:
            where, label, _union = branches[level]
            groups.setdefault(where, {}).setdefault(label, []).append(w)
        else:
            out.append(w)
    for where, by_label in groups.items():

        def mismatch(w: tuple, where: tuple = where) -> bool:
            return w[1] == where and w[0]["type"] in _TYPE_MISMATCH

        matching = [ws for ws in by_label.values() if not all(mismatch(w) for w in ws)]
        if matching:
            out.extend(_resolve(min(matching, key=len), level + 1))
        else:
            first = next(iter(by_label.values()))[0]
            union = first[2][level][2]
            e = {
                "type": "union",
                "msg": f"expected {_describe(union)}",
                "input": first[0].get("input"),
            }
            out.append((e, where, [], None, None))
    return out


def _validate(model: type[BaseModel], data: Any, file: str, prefix: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise InputError(_dedupe(_problems(err, model, file, prefix))) from None
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:  # pathological values
        raise input_error(file, prefix, f"invalid value ({type(exc).__name__}: {exc})") from None


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        key = (p.file, p.field, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _cap(problems: list[Problem]) -> list[Problem]:
    if len(problems) <= MAX_PROBLEMS:
        return problems
    rest = len(problems) - MAX_PROBLEMS
    return [
        *problems[:MAX_PROBLEMS],
        Problem(problems[MAX_PROBLEMS].file, "", f"... and {rest} more problems"),
    ]


# --------------------------------------------------------------------------------------------
# includes and the whole instance


def _display(folder: Path, root: Path, target: Path) -> str:
    """How to name an included file: under the folder as the user named it."""
    try:
        return str(folder / target.relative_to(root))
    except ValueError:  # pragma: no cover - checked before
        return str(target)


def _include(
    ref: str, including: Path, root: Path, file: str, field: str, what: str, others: dict[Path, str]
) -> tuple[Path, str]:
    """Resolve the include ``ref`` written in ``including`` (shown as ``file``) at ``field``.

    ``root`` is the folder includes must stay in; ``others`` maps the resolved files already
    in play (the instance, a -w workload) to their display names, to refuse cycles.
    Returns the resolved path and its display name.
    """
    allowed = f"a path to a YAML file with the {what}, relative to this file's folder"
    if not ref.strip():
        raise input_error(file, field, f"empty include path; expected {allowed}")
    if "\x00" in ref:
        raise input_error(file, field, f"include path {_short(ref)} contains a NUL character")
    if Path(ref).is_absolute():
        raise input_error(
            file, field, f"include {ref!r} is an absolute path; not allowed: give {allowed}"
        )
    try:
        root_r = root.resolve()
        target = (including.parent / ref).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise input_error(
            file, field, f"cannot resolve include {ref!r}: {_os_reason(exc)}"
        ) from None
    if not target.is_relative_to(root_r):
        raise input_error(
            file,
            field,
            f"include {ref!r} leaves the instance's folder {str(root)!r} (it resolves to "
            f"{str(target)!r}); includes must name files inside that folder",
        )
    if target in others:
        back = "this file" if others[target] == file else others[target]
        raise input_error(
            file,
            field,
            f"include cycle: {ref!r} refers back to {back} ({file} -> {others[target]}); "
            f"expected {allowed}, holding the {what} itself",
        )
    shown = _display(root, root_r, target)
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        raise input_error(
            file, field, f"included file {ref!r} not found (looked for {shown})"
        ) from None
    except (OSError, ValueError) as exc:
        raise input_error(file, field, f"cannot read include {ref!r}: {_os_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        raise input_error(file, field, f"include {ref!r} is a folder; expected {allowed}")
    if not stat.S_ISREG(mode):
        raise input_error(file, field, f"include {ref!r} is not a regular file; expected {allowed}")
    return target, shown


def _section(
    key: str,
    model: type[BaseModel],
    value: Any,
    holder: Path,
    holder_name: str,
    root: Path,
    others: dict[Path, str],
    files: dict[str, str],
) -> tuple[Any, str, str]:
    """Validate one section (``topology`` or ``workload``) given as ``value`` at top-level
    key ``key`` of ``holder``, following an include; return (model object, file it came from,
    field prefix of the section in that file: ``"topology."`` inline, ``""`` included).
    """
    what = "topology (cluster)" if key == "topology" else "workload (jobs)"
    field = key
    if value is None:
        raise input_error(
            holder_name,
            field,
            f"required; expected the {what} as a mapping, or a path to a "
            "YAML file with it relative to this file",
        )
    if isinstance(value, str):
        target, shown = _include(value, holder, root, holder_name, field, what, others)
        data, digest = _read(target, shown)
        files[shown] = digest
        if key in data and not (set(data) & set(model.model_fields)):
            inner = data[key]
            if isinstance(inner, str):
                try:
                    t2 = (target.parent / inner).resolve()
                except (OSError, RuntimeError, ValueError):
                    t2 = None
                seen = {**others, target: shown}
                if t2 is not None and t2 in seen:
                    raise input_error(
                        shown,
                        key,
                        f"include cycle: {holder_name} -> {shown} -> {seen[t2]}; "
                        f"an included file must hold the {what} itself",
                    )
            raise input_error(
                shown,
                key,
                f"{shown} is an instance file (it has a top-level {key!r}); an included file "
                f"must hold the {what} itself (includes do not nest)",
            )
        if model is Cluster:
            data = apply_presets(data, shown, "")
        return _validate(model, data, shown, ""), shown, ""
    if not isinstance(value, dict):
        raise input_error(
            holder_name,
            field,
            f"expected the {what} as a mapping or a path to a YAML file "
            f"(relative to this file); got {_kind(value)}",
        )
    if model is Cluster:
        value = apply_presets(value, holder_name, f"{key}.")
    return _validate(model, value, holder_name, field), holder_name, f"{key}."


def load_files(instance_path: str | Path, workload_path: str | Path | None = None):
    """Load an instance (and optionally a separate workload) into validated schema objects.

    Returns ``(InstanceFile, Cluster, Workload, files, topo_file, wl_file)`` where ``files``
    maps each file read to its SHA-256 (for the result's provenance) and ``topo_file`` /
    ``wl_file`` name the files the topology and workload came from. Every problem found in any
    of the files is raised at once as one :class:`InputError`.
    """
    return tuple(load_sections(instance_path, workload_path))[:6]


class Sections(NamedTuple):
    """What :func:`load_sections` returns: :func:`load_files`'s tuple plus, for each section,
    the field prefix under which it sits in its file (``"topology."`` / ``"workload."`` when
    written inline, ``""`` when it is a whole included file), for semantic error messages."""

    inst: InstanceFile
    cluster: Cluster
    workload: Workload
    files: dict[str, str]
    topo_file: str
    wl_file: str
    topo_prefix: str
    wl_prefix: str


def load_sections(instance_path: str | Path, workload_path: str | Path | None = None) -> Sections:
    """:func:`load_files` with the field prefix of each section (see :class:`Sections`)."""
    path = Path(instance_path)
    name = str(path)
    data, digest = _read(path, name)
    files = {name: digest}
    others: dict[Path, str] = {}
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        others[path.resolve()] = name
    problems: list[Problem] = []
    inst = cluster = wl = None
    topo_file = wl_file = name
    topo_prefix, wl_prefix = "topology.", "workload."

    if "topology" not in data and "workload" not in data:
        for model, what in ((Cluster, "topology"), (Workload, "workload")):
            if set(data) & set(model.model_fields):
                raise input_error(
                    name,
                    "",
                    f"this looks like a {what} file, not an instance: an instance file has "
                    "`topology:` and `workload:`, each a mapping or a path to a YAML file",
                )

    shallow = dict(data)
    for key in ("topology", "workload"):
        shallow[key] = "x"  # validated apart, below
    try:
        inst = _validate(InstanceFile, shallow, name)
    except InputError as err:
        problems.extend(err.problems)

    try:
        cluster, topo_file, topo_prefix = _section(
            "topology",
            Cluster,
            data.get("topology"),
            path,
            name,
            path.parent,
            others,
            files,
        )
    except InputError as err:
        problems.extend(err.problems)

    try:
        if workload_path is None:
            wl, wl_file, wl_prefix = _section(
                "workload",
                Workload,
                data.get("workload"),
                path,
                name,
                path.parent,
                others,
                files,
            )
        else:
            wpath = Path(workload_path)
            wname = str(wpath)
            wdata, wdigest = _read(wpath, wname)
            files[wname] = wdigest
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                others.setdefault(wpath.resolve(), wname)
            if "workload" in wdata and "jobs" not in wdata:  # an instance file: use its workload
                wl, wl_file, wl_prefix = _section(
                    "workload",
                    Workload,
                    wdata["workload"],
                    wpath,
                    wname,
                    wpath.parent,
                    others,
                    files,
                )
            else:
                wl, wl_file, wl_prefix = _validate(Workload, wdata, wname, ""), wname, ""
    except InputError as err:
        problems.extend(err.problems)

    if problems:
        raise InputError(_cap(_dedupe(problems)))
    return Sections(inst, cluster, wl, files, topo_file, wl_file, topo_prefix, wl_prefix)
