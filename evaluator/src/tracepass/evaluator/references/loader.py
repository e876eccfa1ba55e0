"""Reading reference files and folders, with errors that point at file, line and field.

Formats by content and name: native YAML/JSON documents and JSONL (one reference per
line); Fair Forge datasets (a JSON list of sessions); Google ADK eval sets, eval results
and legacy test files (`*.test.json`, `*.evalset.json`, …). Line numbers for YAML and
JSON errors come from a second, lazy pass with PyYAML's composer (only paid on error).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tracepass.evaluator.graders.permissions import command_graders_allowed
from tracepass.evaluator.models import ReferenceSet
from tracepass.evaluator.references._fast_json import MAY_DIFFER, fast_loads
from tracepass.evaluator.references.adk import import_adk, looks_like_adk
from tracepass.evaluator.references.dataset import ImportedDataset
from tracepass.evaluator.references.errors import ReferenceLoadError, flatten, raise_collected
from tracepass.evaluator.references.fairforge_import import import_fair_forge, looks_like_fair_forge
from tracepass.evaluator.references.reference_schema import parse_reference, parse_reference_set
from tracepass.evaluator.strict_yaml import (
    StrictLoader,
    YamlFileError,
    locations,
    nesting_message,
    parse,
    too_deep,
    yaml_error,
)

__all__ = [
    "dump_reference_set_yaml",
    "iter_reference_files",
    "load_dataset",
    "load_reference_file",
    "load_reference_sets",
]

log = logging.getLogger(__name__)

SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")
_ADK_SUFFIXES = (".test.json", ".evalset.json", ".evalset_result.json")


def iter_reference_files(paths: Sequence[Path | str]) -> Iterable[Path]:
    """Files named in `paths`, and the reference files found under folders.

    A folder walk leaves out ADK eval *results* (`*.evalset_result.json`, which ADK
    keeps under the agent's `.adk/eval_history/`): they repeat the eval set's cases, so
    loading both would clash on ids. Name such a file explicitly to load it."""
    for p in map(Path, paths):
        if p.is_dir():
            yield from sorted(
                f
                for f in p.rglob("*")
                if f.is_file()
                and f.suffix.lower() in SUFFIXES
                and not f.name.lower().endswith(".evalset_result.json")
            )
        elif p.exists():
            yield p
        else:
            raise ReferenceLoadError("no such file or directory", file=str(p))


# --------------------------------------------------------------------------- line lookup


def _line_map(text: str) -> dict[tuple[str | int, ...], int]:
    """Field path → 1-based line (the shared reader's positions, without columns)."""
    return {path: line for path, (line, _col) in locations(text).items()}


def _locate(
    exc: ReferenceLoadError, file: str, text: str | None, base_line: int = 0
) -> ReferenceLoadError:
    line = exc.line
    if line is None and text is not None:
        lines = _line_map(text)
        path = exc.path
        while path and path not in lines:
            path = path[:-1]
        line = lines.get(path)
        if line is not None:
            line += base_line
    elif line is None and base_line:
        line = base_line + 1
    return ReferenceLoadError(exc.message, file=file, line=line, path=exc.path)


# --------------------------------------------------------------------------- parsing


class _DuplicateKey(ValueError):
    """A mapping repeats a key: both parsers would keep the last value and silently drop
    the first (a reference whose `expected_tools` vanish is worse than an error)."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _parse_text(path: Path, text: str) -> Any:
    name = str(path)
    if path.suffix.lower() == ".json":
        value = _parse_json(path, text)
        if too_deep(value):
            raise ReferenceLoadError(f"invalid JSON: {nesting_message()}", file=name)
        return value
    try:
        return parse(text, name)
    except YamlFileError as exc:
        raise ReferenceLoadError(exc.message, file=name, line=exc.line) from exc


def _parse_json(path: Path, text: str) -> Any:
    name = str(path)
    value = fast_loads(text)  # orjson, when it provably reads what `json` would
    if value is not MAY_DIFFER:
        return value
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise ReferenceLoadError(f"invalid JSON: {nesting_message()}", file=name) from None
    except json.JSONDecodeError as exc:
        raise ReferenceLoadError(f"invalid JSON: {exc.msg}", file=name, line=exc.lineno) from exc
    except _DuplicateKey:
        # JSON is (nearly) YAML: the strict YAML loader finds the line.
        try:
            yaml.load(text, Loader=StrictLoader)  # a SafeLoader subclass: safe
        except yaml.YAMLError as exc:
            raise _yaml_error(name, exc, "invalid JSON") from None
        raise ReferenceLoadError("invalid JSON: duplicate key", file=name) from None


def _yaml_error(name: str, exc: yaml.YAMLError, what: str) -> ReferenceLoadError:
    err = yaml_error(exc, name, what)
    return ReferenceLoadError(err.message, file=name, line=err.line)


def _is_adk_eval_config(path: Path, data: Any) -> bool:
    """ADK keeps its pass criteria in `test_config.json` beside the `*.test.json` files;
    a folder of ADK tests must load without tripping over it."""
    return (
        path.name.lower() == "test_config.json"
        and isinstance(data, Mapping)
        and "criteria" in data
        and "references" not in data
    )


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (*_ADK_SUFFIXES, ".yaml", ".yml", ".jsonl", ".json"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


def _load_jsonl(path: Path, text: str) -> ReferenceSet:
    refs = []
    seen: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except RecursionError:
            raw = None  # refused just below, with its line
        except json.JSONDecodeError as exc:
            raise ReferenceLoadError(f"invalid JSON: {exc.msg}", file=str(path), line=n) from exc
        if raw is None or too_deep(raw):
            raise ReferenceLoadError(
                f"invalid JSON: {nesting_message()}", file=str(path), line=n
            ) from None
        try:
            ref = parse_reference(raw)
        except ReferenceLoadError as exc:
            raise ReferenceLoadError(exc.message, file=str(path), line=n, path=exc.path) from exc
        if ref.id in seen:
            raise ReferenceLoadError(
                f"duplicate reference id {ref.id!r} (first on line {seen[ref.id]})",
                file=str(path),
                line=n,
                path=("id",),
            )
        seen[ref.id] = n
        refs.append(ref)
    return ReferenceSet(name=_stem(path), references=tuple(refs))


def load_dataset(path: Path | str) -> ImportedDataset:
    """One file in any supported format; conversations only for formats that record
    what an agent did (Fair Forge datasets, ADK eval results)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReferenceLoadError(f"cannot read: {exc}", file=str(path)) from exc
    if path.suffix.lower() == ".jsonl":
        return ImportedDataset(reference_set=_load_jsonl(path, text))
    data = _parse_text(path, text)
    if _is_adk_eval_config(path, data):
        return ImportedDataset(
            reference_set=ReferenceSet(name=_stem(path)),
            skipped=(f"{path}: ADK eval config (criteria), not a reference set; skipped",),
        )
    try:
        if path.name.lower().endswith(_ADK_SUFFIXES) or looks_like_adk(data):
            return import_adk(data, source=str(path), name=_stem(path))
        if looks_like_fair_forge(data):
            return import_fair_forge(data, source=str(path), name=_stem(path))
        if data is None:
            raise ReferenceLoadError("empty file", file=str(path))
        return ImportedDataset(reference_set=parse_reference_set(data, default_name=_stem(path)))
    except ReferenceLoadError as exc:
        located = [_locate(e, str(path), text) for e in flatten(exc)]
        raise_collected(located)
        raise  # unreachable: raise_collected raised


def load_reference_sets(
    paths: Sequence[Path | str], *, allow_command_graders: bool = False
) -> list[ReferenceSet]:
    """Every reference set under `paths` (files, or folders searched recursively).

    Reference ids must be unique across everything loaded, since conversations name
    their reference by id alone. A `command` grader is a load error unless
    `allow_command_graders` (graders/permissions.py: it runs programs as this process)."""
    with command_graders_allowed(allow_command_graders):
        return _load_reference_sets(paths)


def _load_reference_sets(paths: Sequence[Path | str]) -> list[ReferenceSet]:
    sets: list[ReferenceSet] = []
    owner: dict[str, str] = {}
    policy_owner: dict[str, str] = {}
    errors: list[ReferenceLoadError] = []
    for f in iter_reference_files(paths):
        try:
            rs = load_reference_file(f)
        except ReferenceLoadError as exc:  # report every file's mistakes, not the first
            errors.extend(flatten(exc))
            continue
        if rs is None:
            continue
        _claim_ids("reference", (ref.id for ref in rs.references), str(f), owner, errors)
        _claim_ids("policy", (p.id for p in rs.policies), str(f), policy_owner, errors)
        sets.append(rs)
    raise_collected(errors)
    return sets


def load_reference_file(
    path: Path, *, allow_command_graders: bool | None = None
) -> ReferenceSet | None:
    """One reference file's set, alone (no check of ids against other files), None for
    a file holding nothing but skipped items. `allow_command_graders` None: as set by
    the caller's `command_graders_allowed` context."""
    if allow_command_graders is not None:
        with command_graders_allowed(allow_command_graders):
            return load_reference_file(path)
    ds = load_dataset(path)
    for line in ds.skipped:  # e.g. ADK user-simulation cases: never dropped quietly
        log.warning("reference loading: %s", line)
    rs = ds.reference_set
    if not rs.references and ds.skipped:
        return None
    return rs


def _claim_ids(
    kind: str,
    ids: Iterable[str],
    file: str,
    owner: dict[str, str],
    errors: list[ReferenceLoadError],
) -> None:
    """Record `file` as the owner of each id; an id another file already owns is an
    error naming both files (the first file keeps it)."""
    for item_id in ids:
        if item_id in owner:
            errors.append(
                ReferenceLoadError(
                    f"duplicate {kind} id {item_id!r} (also in {owner[item_id]})", file=file
                )
            )
        owner.setdefault(item_id, file)


# --------------------------------------------------------------------------- dumping


def _compact(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"name"} and isinstance(value.get("name"), str):
            return value["name"]  # a tool whose arguments are not checked
        return {k: _compact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_compact(v) for v in value]
    return value


def dump_reference_set_yaml(rs: ReferenceSet) -> str:
    """The native YAML form (round-trips through `load_reference_sets`)."""
    data = rs.model_dump(mode="json", exclude_defaults=True)
    data.setdefault("version", rs.version)
    out: dict[str, Any] = {"name": data["name"], "version": data["version"]}
    refs = []
    for ref in data.get("references", []):
        turns = []
        for turn in ref.get("turns", []):
            if "expected_tools" in turn:
                turn["expected_tools"] = [_compact(t) for t in turn["expected_tools"]]
            turns.append(turn)
        ref["turns"] = turns
        refs.append(ref)
    out["references"] = refs
    if data.get("policies"):
        out["policies"] = data["policies"]
    return yaml.safe_dump(
        out, sort_keys=False, allow_unicode=True, default_flow_style=False, width=100
    )
