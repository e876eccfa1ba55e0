"""The one error type every reference loader and importer raises."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["ReferenceLoadError", "format_path"]


def format_path(path: Sequence[str | int]) -> str:
    """``("references", 3, "turns", 0)`` → ``references[3].turns[0]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class ReferenceLoadError(ValueError):
    """Bad reference input, located as precisely as the format allows:
    ``file:line: field.path: what is wrong``."""

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        path: Sequence[str | int] = (),
    ) -> None:
        self.file = file
        self.line = line
        self.path = tuple(path)
        self.message = message
        where = ""
        if file is not None:
            where = file if line is None else f"{file}:{line}"
        text = format_path(self.path)
        prefix = ": ".join(x for x in (where, text) if x)
        super().__init__(f"{prefix}: {message}" if prefix else message)
