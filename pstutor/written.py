"""The files a command writes into a folder the user chose — and never any other file there.

A command that writes output (`pstutor demo --out`, `pstutor cluster launch-files --out`)
writes a *set* of files. Beside them it keeps a small record, `.pstutor-written`, of what it
wrote: per command, each file's name and the SHA-256 of what it wrote. With it, a rerun into
the same folder tells apart

- its own files, unchanged since: replaced, or removed when the new set no longer has them
  (so a folder never holds a mix of two runs, e.g. an old `start-worker-2.sh` beside a
  manifest for two workers);
- its own files, edited since: refused, with their list, unless `force`;
- everything else (the user's files, links, folders, another command's files): never
  replaced, never removed, whatever `force` says.

A file is written under a temporary name and renamed into place, so a link where the file
goes is refused before, and could never be followed; an interrupted run leaves whole files.
The record is written before the files (naming the old and the new content) and after them,
so a run stopped half-way still knows every file it wrote.

    check(folder, names, owner, force)          # before the work: refuse early
    write(folder, files, owner, force)          # after it: the set replaces the last one

The record has no `.json` or `.yaml` suffix: `kubectl apply -f FOLDER` reads files by suffix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

from pstutor.language import say

RECORD = ".pstutor-written"
_ABOUT = "The files pstutor wrote here; it replaces or removes only these, and only while unchanged."


class OutputRefused(ValueError):
    """Writing would replace or remove a file that is not this command's own output (one line)."""


def check(folder: Path, names: Iterable[str], owner: str, force: bool = False) -> None:
    """Refuse, before any work, a folder where writing `names` would touch a file not ours."""
    _plan(Path(folder), list(names), owner, force)


def write(folder: Path, files: Mapping[str, bytes | str], owner: str, force: bool = False,
          executable: Collection[str] = ()) -> list[Path]:
    """Write `files` (name -> content) as `owner`'s set in `folder`; remove its stale files.

    Returns the paths written, in the order given. `executable` names files made executable.
    """
    folder = Path(folder)
    record, stale = _plan(folder, list(files), owner, force)
    contents = {name: text.encode("utf-8") if isinstance(text, str) else text for name, text in files.items()}
    new = {name: [_digest(content)] for name, content in contents.items()}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        old = record.get(owner, {})
        record[owner] = {name: sorted({*old.get(name, []), *new.get(name, [])}) for name in {*old, *new}}
        _save(folder, record)  # an interrupted run still knows the old and the new files
        for name, content in contents.items():
            _replace(folder / name, content, 0o777 if name in executable else 0o666)
        for name in stale:
            (folder / name).unlink(missing_ok=True)
        record[owner] = new
        _save(folder, record)
    except OSError as err:
        raise OutputRefused(say(f"cannot write into {folder}: {err.strerror}.",
                                f"无法写入 {folder}：{err.strerror}。")) from None
    return [folder / name for name in files]


def _plan(folder: Path, names: list[str], owner: str, force: bool) -> tuple[dict, list[str]]:
    """The folder's record and the stale files to remove, or `OutputRefused` saying why not."""
    if any(not name or "/" in name or name in (".", "..", RECORD) for name in names):
        raise ValueError(f"not a file name of an output set: {names}")  # a programming error
    if os.path.lexists(folder) and not folder.is_dir():
        raise OutputRefused(say(f"{folder} is a file, not a folder; give a folder.",
                                f"{folder} 是文件而不是文件夹；请给出一个文件夹。"))
    existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
    if not existing.is_dir() or not _can_create_in(existing):
        raise OutputRefused(say(f"cannot write into {existing}.", f"无法写入 {existing}。"))
    record = _load(folder)
    mine = record.get(owner, {})
    foreign, edited, stale = [], [], []
    for name in [*names, *(n for n in mine if n not in names)]:
        path = folder / name
        if not os.path.lexists(path):
            continue
        ours = name in mine and path.is_file() and not path.is_symlink()
        if not ours:
            if name in names:
                foreign.append(name)
        elif _digest(path.read_bytes()) not in mine[name]:
            edited.append(name)
        if ours and name not in names:
            stale.append(name)
    if foreign:
        raise OutputRefused(say(
            f"not replaced: {_listed(foreign)} in {folder} {'was' if len(foreign) == 1 else 'were'} "
            f"not written by pstutor {owner}; move {'it' if len(foreign) == 1 else 'them'} away "
            "or choose another folder.",
            f"不会覆盖：{folder} 中的 {_listed(foreign)} 不是 pstutor {owner} 写的；"
            "请先移走，或换一个文件夹。"))
    if edited and not force:
        raise OutputRefused(say(
            f"{_listed(edited)} in {folder} {'was' if len(edited) == 1 else 'were'} edited since "
            f"pstutor {owner} wrote {'it' if len(edited) == 1 else 'them'}; rerun with --force "
            "to replace your edits, or choose another folder.",
            f"{folder} 中的 {_listed(edited)} 在 pstutor {owner} 写出之后被修改过；"
            "要覆盖这些修改，请加 --force 重新运行，或换一个文件夹。"))
    return record, stale


def _can_create_in(folder: Path) -> bool:
    """Whether a file can be created in `folder`: tried, since permissions do not bind root and a
    read-only file system is not a permission."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _load(folder: Path) -> dict[str, dict[str, list[str]]]:
    """The record of `folder` (empty when there is none); refuse one that is not ours."""
    path = folder / RECORD
    if not os.path.lexists(path):
        return {}
    try:
        if path.is_symlink() or not path.is_file():
            raise ValueError
        sets = json.loads(path.read_text(encoding="utf-8"))["sets"]
        if not all(isinstance(files, dict) and all(isinstance(d, list) for d in files.values())
                   for files in sets.values()):
            raise ValueError
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise OutputRefused(say(
            f"{path} is not a record pstutor wrote; move it away or choose another folder.",
            f"{path} 不是 pstutor 写的记录；请先移走它，或换一个文件夹。")) from None
    return sets


def _save(folder: Path, record: dict) -> None:
    text = json.dumps({"about": _ABOUT, "sets": record}, indent=1, sort_keys=True) + "\n"
    _replace(folder / RECORD, text.encode("utf-8"), 0o666)


def _replace(path: Path, content: bytes, mode: int) -> None:
    """Write `content` to a new file beside `path` and rename it over `path` (never following a link)."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(content)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, mode & ~umask)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _listed(names: list[str]) -> str:
    return ", ".join(sorted(names))
