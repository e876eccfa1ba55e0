"""The one error type every reference loader and importer raises."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "MAX_REPORTED_ERRORS",
    "ReferenceLoadError",
    "ReferenceLoadErrors",
    "flatten",
    "format_path",
    "raise_collected",
]

# A file with many mistakes reports this many (each file:line), then how many more.
MAX_REPORTED_ERRORS = 20


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


class ReferenceLoadErrors(ReferenceLoadError):
    """Several mistakes, each a located `ReferenceLoadError`, reported together so a user
    fixes a file in one pass instead of one error per run. The first error's fields are
    this error's own (code that reads `.file`/`.line` keeps working); `str()` is one line
    per error for the first `MAX_REPORTED_ERRORS`, then `… and N more error(s)`."""

    def __init__(self, errors: Sequence[ReferenceLoadError]) -> None:
        if not errors:
            raise ValueError("ReferenceLoadErrors needs at least one error")
        first = errors[0]
        super().__init__(first.message, file=first.file, line=first.line, path=first.path)
        self.errors = tuple(errors)
        lines = [str(e) for e in self.errors[:MAX_REPORTED_ERRORS]]
        if len(self.errors) > MAX_REPORTED_ERRORS:
            lines.append(f"… and {len(self.errors) - MAX_REPORTED_ERRORS} more error(s)")
        self.args = ("\n".join(lines),)

    def __str__(self) -> str:
        return str(self.args[0])


def flatten(error: ReferenceLoadError) -> tuple[ReferenceLoadError, ...]:
    """The individual errors of `error` (itself, unless it is a `ReferenceLoadErrors`)."""
    return error.errors if isinstance(error, ReferenceLoadErrors) else (error,)


def raise_collected(errors: Sequence[ReferenceLoadError]) -> None:
    """Raise the collected errors, if any: one as itself, several together."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ReferenceLoadErrors(errors)
