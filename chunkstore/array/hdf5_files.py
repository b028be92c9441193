"""Which files a copy of an HDF5 (or netCDF-4) object reads, and the refusal of any
outside the directories the caller allowed.

An HDF5 dataset can keep its bytes outside the file it is in: in *external storage*
(raw bytes of any file named in its header), or as a *virtual dataset* (mapped from
datasets of other files); a group member can be an *external link* to an object of
another file, and a soft link can lead through one. A converter of untrusted files
would copy (publish) those files. Each is refused (``ExternalDataError``, naming the
dataset and the file) unless the caller names the directories such files may be in
(``allow_external``); a file outside them is still refused. HDF5 looks for a linked
file in several places (the name as given, prefixes from the environment and the
access properties, the linking file's directory, the working directory): every one of
them that exists must be inside an allowed directory, whichever HDF5 would pick.

h5py is imported only by the functions that are given h5py objects.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from chunkstore.config import environ
from chunkstore.errors import ExternalDataError

#: links and virtual datasets followed through one another at most this deep
MAX_DEPTH = 8
_ORIGIN = "${ORIGIN}"


def h5py_module() -> Any:
    """h5py if it is imported (an h5py object exists only then), else None."""
    return sys.modules.get("h5py")


def is_hdf5(obj: Any) -> bool:
    """Whether ``obj`` is an h5py file, group or dataset."""
    h5py = h5py_module()
    return h5py is not None and isinstance(obj, h5py.Group | h5py.Dataset)


def allowed_directories(allow_external: Any) -> tuple[str, ...]:
    """The real paths of the directories named by ``allow_external`` (None or an empty
    list: none; a path or a list of paths). ``True`` is refused: it would allow every
    file of the machine."""
    if allow_external is None or allow_external is False:
        return ()
    if allow_external is True:
        raise TypeError("allow_external: name the directories external files may be read "
                        "from, e.g. allow_external=['/data/raw'] (True would allow any file)")
    items = [allow_external] if isinstance(allow_external, str | bytes | os.PathLike) else (
        list(allow_external))
    out = []
    for item in items:
        path = os.fsdecode(os.fspath(item))
        if not os.path.isdir(path):
            raise ValueError(f"allow_external (--allow-external): {path!r} is not a "
                             "directory")
        out.append(os.path.realpath(path))
    return tuple(out)


def inside(path: str, allowed: Iterable[str]) -> bool:
    """Whether ``path`` (its real path, symbolic links resolved) is in one of the
    ``allowed`` directories (real paths)."""
    real = os.path.realpath(path)
    return any(real == d or real.startswith(d.rstrip(os.sep) + os.sep) for d in allowed)


def _refuse(where: str, what: str, path: str, allowed: tuple[str, ...]) -> ExternalDataError:
    """``what``: says what reads the file ``{path}``."""
    real = os.path.realpath(path)
    if real != os.path.abspath(path):
        path = f"{path} (a link to {real})"
    if not allowed:
        why = ("refused: a copy would publish that file (to allow it, name its directory: "
               "allow_external=[DIR], --allow-external DIR)")
    else:
        why = "refused: it is outside the allowed directories " + ", ".join(map(repr, allowed))
    return ExternalDataError(f"{where} {what.format(path=repr(path))}; {why}")


def _text(value: Any) -> str:
    return os.fsdecode(value) if isinstance(value, bytes) else str(value)


def _directory_of(obj: Any) -> str:
    return os.path.dirname(os.path.abspath(obj.file.filename))


def _candidates(name: str, env_var: str, prefix: str, origin: str) -> list[str]:
    """Every file HDF5 may open for the file name ``name`` of an external link or of a
    virtual dataset's source (``origin``: the directory of the file naming it)."""
    out = []
    if os.path.isabs(name):  # tried as given, then by its last part as a relative name
        out.append(name)
        name = os.path.basename(name)
    prefixes = [p for p in (environ(env_var) or "").split(os.pathsep) if p]
    prefixes += [prefix] if prefix else []
    for p in prefixes:
        out.append(os.path.join(p.replace(_ORIGIN, origin), name))
    out.append(os.path.join(origin, name))
    out.append(os.path.abspath(name))
    return [os.path.normpath(p) for p in out]


def _check_files(candidates: list[str], where: str, what: str, allowed: tuple[str, ...]
                 ) -> list[str]:
    """The candidates that exist, each checked to be inside ``allowed``."""
    if not allowed:
        raise _refuse(where, what, candidates[0], allowed)
    found = [c for c in dict.fromkeys(candidates) if os.path.exists(c)]
    for path in found:
        if not inside(path, allowed):
            raise _refuse(where, what, path, allowed)
    return found


def _efile_paths(dset: Any, name: str) -> list[str]:
    """Where HDF5 may read a file of a dataset's external storage: the name if absolute,
    else under the access property's prefix (set from ``HDF5_EXTFILE_PREFIX`` when HDF5
    started; ``${ORIGIN}``: the dataset's file's directory), else in the working
    directory; and under ``HDF5_EXTFILE_PREFIX`` as it is now, should it have changed."""
    if os.path.isabs(name):
        return [name]
    origin = _directory_of(dset)
    prefix = _text(dset.id.get_access_plist().get_efile_prefix())
    out = [os.path.join(prefix.replace(_ORIGIN, origin), name) if prefix
           else os.path.abspath(name)]
    env = environ("HDF5_EXTFILE_PREFIX")
    if env:
        out.append(os.path.join(env.replace(_ORIGIN, origin), name))
    return [os.path.normpath(p) for p in out]


def check_dataset(dset: Any, allowed: tuple[str, ...], depth: int = 0) -> None:
    """Refuse a dataset whose bytes come from files outside ``allowed``: its external
    storage, and the sources of a virtual dataset (followed into them)."""
    where = f"{dset.file.filename}: dataset {dset.name!r}"
    if depth > MAX_DEPTH:
        raise ExternalDataError(f"{where}: virtual datasets and links lead through one "
                                f"another more than {MAX_DEPTH} deep; refused")
    for name, _offset, _size in dset.external or ():
        for path in _efile_paths(dset, _text(name)):
            if not allowed or not inside(path, allowed):
                raise _refuse(where, "keeps its bytes in another file, {path} (HDF5 "
                              "external storage)", path, allowed)
    if dset.is_virtual:
        for source in dset.virtual_sources():
            _check_virtual_source(dset, _text(source.file_name), _text(source.dset_name),
                                  allowed, where, depth)


def _check_virtual_source(dset: Any, file_name: str, dset_name: str,
                          allowed: tuple[str, ...], where: str, depth: int) -> None:
    h5py = h5py_module()
    what = "is a virtual dataset reading another file, {path}"
    if file_name == ".":  # a dataset of the same file, found as a link would be
        source = resolve(dset.file, dset_name, allowed, depth + 1)
        if isinstance(source, h5py.Dataset):
            check_dataset(source, allowed, depth + 1)
        return
    if "%" in file_name or "%" in dset_name:
        if not allowed:
            raise _refuse(where, what, file_name, allowed)
        raise ExternalDataError(f"{where} is a virtual dataset whose source files are named "
                                f"by a pattern ({file_name!r}); refused: its files cannot "
                                "be checked")
    prefix = _text(dset.id.get_access_plist().get_virtual_prefix())
    candidates = _candidates(file_name, "HDF5_VDS_PREFIX", prefix, _directory_of(dset))
    for path in _check_files(candidates, where, what, allowed):
        try:
            f = h5py.File(path, "r")
        except OSError:
            continue  # not an HDF5 file: HDF5 reads nothing from it either
        with f:
            source = resolve(f, dset_name, allowed, depth + 1)
            if isinstance(source, h5py.Dataset):
                check_dataset(source, allowed, depth + 1)


def member(group: Any, name: str, allowed: tuple[str, ...], depth: int = 0) -> Any:
    """``group[name]`` (None if missing, dangling or a loop of links), its link checked
    first: an external link's files must be inside ``allowed``; a soft link is followed
    as a path, its components checked the same way."""
    h5py = h5py_module()
    where = f"{group.file.filename}: member {group.name.rstrip('/') + '/' + name!r}"
    if depth > MAX_DEPTH:
        return None  # a loop of soft links (HDF5 gives up too)
    try:
        link = group.get(name, getlink=True)
    except (TypeError, KeyError, OSError) as e:
        raise ExternalDataError(f"{where}: a link chunkstore cannot check ({e}); "
                                "refused") from None
    if link is None or isinstance(link, h5py.HardLink):
        return group.get(name)
    if isinstance(link, h5py.SoftLink):
        start = group.file["/"] if link.path.startswith("/") else group
        return resolve(start, link.path, allowed, depth + 1)
    if isinstance(link, h5py.ExternalLink):
        what = f"is an external link to {link.path!r} in another file, {{path}}"
        candidates = _candidates(_text(link.filename), "HDF5_EXT_PREFIX", "",
                                 _directory_of(group))
        _check_files(candidates, where, what, allowed)
        obj = group.get(name)
        if obj is not None and not inside(obj.file.filename, allowed):  # what HDF5 opened
            raise _refuse(where, what, obj.file.filename, allowed)
        return obj
    raise ExternalDataError(f"{where}: a user-defined HDF5 link, which chunkstore does not "
                            "follow; refused")


def resolve(start: Any, path: str, allowed: tuple[str, ...], depth: int = 0) -> Any:
    """The object at ``path`` from the group ``start``, each link on the way checked
    (``member``); None if there is none."""
    h5py = h5py_module()
    node = start.file["/"] if path.startswith("/") else start
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if not isinstance(node, h5py.Group):
            return None
        node = member(node, part, allowed, depth)
        if node is None:
            return None
    return node


def check_value(value: Any) -> None:
    """Refuse an h5py dataset given as a value to store (``a[...] = dset``, ``cs.array``,
    ``from_array``, ``create_array(data=...)``) whose bytes come from other files: only
    ``cs.copy(..., allow_external=[DIR])`` and the CLI's ``--allow-external`` read them."""
    h5py = h5py_module()
    if h5py is not None and isinstance(value, h5py.Dataset):
        check_dataset(value, ())
