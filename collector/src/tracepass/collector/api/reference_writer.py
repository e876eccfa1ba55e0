"""Write an approved reference into the reference directory: validated by the strict
loader first, written atomically, never over an existing file.

1. The text is written to a scratch directory under its final file name and loaded
   with `load_dataset` (the loader the watcher uses): an error comes back with the
   loader's `file:line` message, naming the final path, and nothing is written.
2. It names no code (a `command` grader, an `argument_match` callable): refused (400)
   whatever `evaluation.allow_command_graders` says; the approver is not the operator.
3. Its reference ids must not clash with the references in service, nor with those of
   files approved but not loaded yet (`known_ids`): the watcher would block the file.
4. The text is written to a hidden `.tmp` file in the directory (a suffix the loader
   never reads), flushed and fsynced, then hard-linked to `<name>.yaml`: the link
   fails if that name exists, so a person's file is never rewritten and two approvals
   of one candidate make one file. The temporary file is removed whatever happens, so
   a full or read-only directory leaves nothing half-written.
"""

from __future__ import annotations

import errno
import os
import secrets
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tracepass.evaluator.graders.permissions import no_reference_code_in_approvals
from tracepass.evaluator.models import ReferenceSet
from tracepass.evaluator.references import ReferenceLoadError, load_dataset

__all__ = ["ApprovalError", "Written", "write_reference"]


class ApprovalError(Exception):
    """Why a reference could not be written; `status` is the HTTP status to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    reference_ids: tuple[str, ...]
    created: bool  # False: the file already existed (approved before)


def _status(exc: OSError) -> int:
    return 507 if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else 500


def _validate(name: str, text: str, shown: Path) -> ReferenceSet:
    try:
        with tempfile.TemporaryDirectory(prefix="tracepass-approve-") as scratch:
            path = Path(scratch) / name
            path.write_text(text, encoding="utf-8")
            try:
                # Never code (graders/permissions.py), whatever the collector allows.
                with no_reference_code_in_approvals():
                    return load_dataset(path).reference_set
            except ReferenceLoadError as exc:
                raise ApprovalError(400, str(exc).replace(str(path), str(shown))) from None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ApprovalError(
            _status(exc), f"cannot check {shown} (scratch space): {reason}; nothing was written"
        ) from None


def write_reference(
    directory: Path,
    name: str,
    text: str,
    *,
    known_ids: Callable[[str], bool] = lambda _: False,
) -> Written:
    """Validate `text` and write it to `directory/name` (see the module docstring).
    `known_ids(id)`: whether a reference with that id is in service already."""
    target = directory / name
    rset = _validate(name, text, target)
    ids = tuple(r.id for r in rset.references)
    if not ids:
        raise ApprovalError(400, f"{target}: the YAML holds no reference")
    if target.exists():
        return Written(target, ids, created=False)
    clash = [i for i in ids if known_ids(i)]
    if clash:
        raise ApprovalError(
            409, f"{target}: reference id {clash[0]!r} is already loaded from another file"
        )
    if not directory.is_dir():
        raise ApprovalError(500, f"{directory}: the reference directory does not exist")
    tmp = directory / f".{name}.{secrets.token_hex(4)}.tmp"
    data = text.encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, target)
        except FileExistsError:
            return Written(target, ids, created=False)
        _fsync_dir(directory)
    except OSError as exc:
        status = 507 if exc.errno in (errno.ENOSPC, errno.EDQUOT) else 500
        reason = exc.strerror or str(exc)
        raise ApprovalError(
            status, f"cannot write {target}: {reason}; nothing was written"
        ) from None
    finally:
        try:
            tmp.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass
    return Written(target, ids, created=True)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
