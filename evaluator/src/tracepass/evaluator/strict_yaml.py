"""The one YAML reader for files people write by hand (the collector config, reference
sets): refuses duplicate keys, and every error is one line `file:line:col: message`.

Why one shared reader: PyYAML's own messages span several lines and name
`"<unicode string>"` instead of the file; it keeps the last of two equal keys and
silently drops the first (a config whose `receiver:` section is written twice loses
half of it); and a file that is not UTF-8 escapes as a `UnicodeDecodeError` traceback.
Line/column lookup for schema errors (`locations`) is a second pass over PyYAML's node
tree, paid only when there is an error to report.

Aliases are bounded before anything walks the tree: PyYAML shares an aliased node, but
every walk (validation, `locations`) expands it, so a 454-byte "billion laughs" file
grew to 3.8 GB in `locations`. A file whose aliases would add more than
`MAX_ALIAS_EXPANSION` nodes to what is written is refused at the alias that crosses it.

Nesting is bounded while the tree is built: PyYAML's composer and constructor recurse
once per level, so a 5,000-level file (`[[[[…`, 10 KB) was a `RecursionError` (exit 1,
or a 500 from the API) instead of an error naming the line. A file nesting mappings and
lists deeper than `MAX_NESTING` levels is refused at the node that crosses it; no
reference or config needs a tenth of that.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_NESTING",
    "StrictLoader",
    "YamlFileError",
    "locate",
    "locations",
    "nesting_message",
    "parse",
    "read_text",
    "too_deep",
    "yaml_error",
]

Location = tuple[int, int]  # 1-based line and column
# Nodes aliases may add beyond those written in the file (a reference set reusing an
# anchored block a few hundred times stays far below it).
MAX_ALIAS_EXPANSION = 100_000
FieldPath = tuple[str | int, ...]
# Levels of mappings and lists a file may nest (the readers of the parsed value recurse
# a few frames per level, within Python's default limit of 1,000 frames).
MAX_NESTING = 100


def nesting_message() -> str:
    return f"nested deeper than {MAX_NESTING} levels of mappings and lists"


def too_deep(value: Any) -> bool:
    """Whether a parsed value (JSON: read without a depth limit of its own below
    Python's recursion limit) nests mappings and lists deeper than `MAX_NESTING`.
    Iterative, linear in the value's size."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= MAX_NESTING:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


class _DepthLimit(yaml.composer.Composer):
    """The composer, refusing a node nested deeper than `MAX_NESTING` (checked before the
    recursion that would overflow the stack). Mixed in before a loader, whose parser
    provides the events."""

    _depth = 0
    check_event: Any
    peek_event: Any

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_NESTING and (
            self.check_event(yaml.SequenceStartEvent) or self.check_event(yaml.MappingStartEvent)
        ):
            raise yaml.composer.ComposerError(
                None, None, nesting_message(), self.peek_event().start_mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class YamlFileError(ValueError):
    """A file that cannot be read or parsed; `str()` is `file:line:col: message`."""

    def __init__(
        self, message: str, *, file: str, line: int | None = None, column: int | None = None
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        where = file
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        super().__init__(f"{where}: {message}")


class StrictLoader(_DepthLimit, yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate mapping keys and deep nesting."""


class _LocatingLoader(_DepthLimit, yaml.SafeLoader):
    """The safe loader `locations` composes with (duplicate keys allowed: it only
    looks up positions), bounded in depth like `StrictLoader`."""


def _strict_mapping(loader: StrictLoader, node: yaml.MappingNode) -> Any:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable key: PyYAML reports it itself
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {first})",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=True)


StrictLoader.add_constructor("tag:yaml.org,2002:map", _strict_mapping)


def read_text(path: Path) -> str:
    """The file's text; unreadable or non-UTF-8 files are a `YamlFileError` locating
    the first bad byte."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise YamlFileError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise YamlFileError(
            f"not UTF-8: byte 0x{data[exc.start]:02x} ({exc.reason})",
            file=str(path),
            line=line,
            column=column,
        ) from None


def parse(text: str, file: str, what: str = "invalid YAML") -> Any:
    """`text` parsed with `StrictLoader`; errors as one-line `YamlFileError`s."""
    loader = StrictLoader(text)  # a SafeLoader subclass: safe
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_aliases(node, file)
        return loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, file, what) from None
    finally:
        loader.dispose()


def _check_aliases(root: Any, file: str) -> None:
    """Refuse a node tree whose aliases expand beyond `MAX_ALIAS_EXPANSION` extra nodes.
    Expanded sizes are computed once per distinct node (post-order, memoized), so the
    check itself is linear in what is written."""
    expanded: dict[int, int] = {}
    height: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in expanded:
            continue
        children: list[Any] = []
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                children += (k, v)
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        if not children_done:
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in expanded)
            continue
        distinct += 1
        size = 1 + sum(expanded[id(c)] for c in children)
        expanded[id(node)] = size
        # Aliases nest too: a node whose expansion is deeper than the composer allows
        # would overflow the constructor's recursion.
        height[id(node)] = 1 + max((height[id(c)] for c in children), default=0)
        if height[id(node)] > MAX_NESTING + 1:
            mark = node.start_mark
            raise YamlFileError(
                nesting_message() + " (through aliases)",
                file=file,
                line=mark.line + 1,
                column=mark.column + 1,
            )
        if size - distinct > MAX_ALIAS_EXPANSION:
            mark = node.start_mark
            raise YamlFileError(
                f"aliases expand to more than {MAX_ALIAS_EXPANSION:,} nodes beyond those "
                "written (a YAML alias bomb?); write the repeated parts out or reuse fewer",
                file=file,
                line=mark.line + 1,
                column=mark.column + 1,
            )


def yaml_error(exc: yaml.YAMLError, file: str, what: str = "invalid YAML") -> YamlFileError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None)
    context = getattr(exc, "context", None)
    if problem is None:
        message = " ".join(str(exc).split())
    else:
        message = _indentation_message(exc) or problem + (f" ({context})" if context else "")
    return YamlFileError(
        f"{what}: {message}",
        file=file,
        line=mark.line + 1 if mark is not None else None,
        column=mark.column + 1 if mark is not None else None,
    )


# PyYAML's token names, as a person reading the file would say them.
_TOKENS = {
    "?": "a key",
    "<block mapping start>": "a key",
    "<block sequence start>": "a list item",
    "-": "a list item",
    "<block entry>": "a list item",
    "<scalar>": "a value",
}


def _indentation_message(exc: yaml.YAMLError) -> str | None:
    """PyYAML says "expected <block end>, but found '?'" for a line indented to match
    no block above (a file with no `?` in it): say that, and where the block began."""
    problem = getattr(exc, "problem", None) or ""
    found = problem.removeprefix("expected <block end>, but found ")
    if found == problem:
        return None
    what = _TOKENS.get(found.strip("'"), found.strip("'"))
    start = getattr(exc, "context_mark", None)
    block = "block"
    if start is not None and getattr(start, "buffer", None):
        block = "list" if start.buffer[start.pointer] == "-" else "mapping"
    where = f" that starts at line {start.line + 1}" if start is not None else ""
    return (
        f"bad indentation: {what} at a column that fits neither the {block}{where} nor "
        "the block around it; indent it like the lines it belongs with"
    )


def locations(text: str) -> dict[FieldPath, Location]:
    """Field path → (line, column) from PyYAML's node tree: the key's position for
    mapping entries (where the user looks), the item's for sequence items."""
    out: dict[FieldPath, Location] = {}
    try:
        root = yaml.compose(text, Loader=_LocatingLoader)  # a SafeLoader subclass: safe
        if root is not None:
            _check_aliases(root, "<locations>")
    except (yaml.YAMLError, YamlFileError):
        return out  # no positions rather than an unbounded walk
    stack: list[tuple[Any, FieldPath]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        out.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value if isinstance(k, yaml.ScalarNode) else str(k)
                out.setdefault((*path, key), (k.start_mark.line + 1, k.start_mark.column + 1))
                stack.append((v, (*path, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                stack.append((v, (*path, i)))
    return out


def locate(where: dict[FieldPath, Location], path: Sequence[str | int]) -> Location | None:
    """The position of `path`, or of its nearest ancestor present in the file (a
    missing required field points at the section that lacks it)."""
    p = tuple(path)
    while p and p not in where:
        p = p[:-1]
    return where.get(p)
