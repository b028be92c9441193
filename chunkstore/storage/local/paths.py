"""Confined access below a LocalStore root, checked on every operation.

Each operation (a ``get``, a batch of ``get_many``, a listing...) opens the root
directory once and reaches every key from that descriptor, one component at a time,
with ``O_NOFOLLOW`` (``openat``): a directory that is swapped for a symlink between two
operations is seen by the next one, so nothing can lead a read, write, stat, listing or
delete outside the root. Directories are opened once per operation (``c/0`` is shared by
all its chunks), so the per-key cost is the one ``openat`` of the file itself.

Symlinks that stay inside the root are followed, resolved here component by component
the way ``openat2(RESOLVE_BENEATH)`` does: ``..`` never climbs above the root, and an
absolute target must name a place below the root (by its real or its given path). A
symlink leading anywhere else makes the key an ``InvalidKeyError`` that names it.
Listings never enter symlinked directories, and list a symlinked file only when it
resolves to a regular file inside the root.
"""

from __future__ import annotations

import errno
import os
import resource
import stat
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

from chunkstore.errors import InvalidKeyError
from chunkstore.storage.base import ByteRange

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO planted at a key must not wait for a writer
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
#: symlinks followed in one lookup before giving up (as the kernel's ELOOP limit)
MAX_SYMLINKS = 40
_CREATE_ATTEMPTS = 100  # mkdir/rmdir ping-pong with a pruning deleter, bounded
_NAME_MAX = 255  # bytes in a file name, where the file system does not say
_MISS = object()


def read_exact(fd: int, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset`` of an open file (fewer only at end of file)."""
    data = os.pread(fd, length, offset)
    if len(data) == length or not data:
        return data
    parts, got = [data], len(data)
    while got < length:
        more = os.pread(fd, length - got, offset + got)
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def read_range(fd: int, size: int, byte_range: ByteRange | None) -> bytes:
    """The bytes of ``byte_range`` of an open file of ``size`` bytes."""
    if byte_range is None:
        start, stop = 0, size
    else:
        start, stop = byte_range
        if start < 0 and stop is None:
            start = max(0, size + start)
        stop = size if stop is None else min(stop, size)
    if stop <= start:
        return b""
    return read_exact(fd, start, stop - start)


def _entries(dir_fd: int) -> list[os.DirEntry]:
    with os.scandir(dir_fd) as it:
        return list(it)


class Root:
    """Where a store lives: its path as given and as resolved, for symlink targets."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._prefixes: tuple[str, ...] | None = None

    def prefixes(self) -> tuple[str, ...]:
        """The root's absolute path and real path, each ending with a separator."""
        if self._prefixes is None:
            self._prefixes = tuple({os.path.join(self.path, ""),
                                    os.path.join(os.path.realpath(self.path), "")})
        return self._prefixes

    def walk(self, owner: Any, create: bool = False) -> Walk:
        """A :class:`Walk` of one operation (``owner`` names the store in errors); when
        the root does not exist it is made if ``create``, else every key is missing."""
        try:
            fd: int | None = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except FileNotFoundError:
            if not create:
                return Walk(self, None, owner)
            os.makedirs(self.path, exist_ok=True)
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return Walk(self, fd, owner)


class Walk:
    """One operation's confined view of the root: directories opened at most once
    (thread-safe), every descriptor closed by ``close()`` (or the ``with`` block)."""

    def __init__(self, root: Root, fd: int | None, owner: Any) -> None:
        self.root, self.fd, self.owner = root, fd, owner
        self._dirs: dict[str, int | None] = {"": fd}
        self._owned: list[int] = [] if fd is None else [fd]
        self._mutexes: dict[int, threading.Lock] = {}
        self._lock = threading.RLock()

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every descriptor of this operation."""
        with self._lock:
            owned, self._owned, self._dirs, self._mutexes = self._owned, [], {}, {}
        for fd in owned:
            os.close(fd)

    def release(self) -> None:
        """Close the directories opened so far (not the root), to bound the descriptors
        a large operation holds; call only when no thread is using them."""
        with self._lock:
            owned = [fd for fd in self._owned if fd != self.fd]
            self._owned = [] if self.fd is None else [self.fd]
            self._dirs = {"": self.fd}
            self._mutexes = {}
        for fd in owned:
            os.close(fd)

    def mutex(self, dir_fd: int) -> threading.Lock:
        """The lock this walk's threads hold around the commit lock (``flock``) of the
        directory ``dir_fd``: they share its descriptor, and ``flock`` only excludes
        other descriptors (other walks and processes)."""
        lock = self._mutexes.get(dir_fd)
        if lock is None:
            with self._lock:
                lock = self._mutexes.setdefault(dir_fd, threading.Lock())
        return lock

    @property
    def open_dirs(self) -> int:
        """How many directory descriptors this walk holds."""
        return len(self._owned)

    def _keep(self, fd: int | None) -> int | None:
        if fd is not None:
            self._owned.append(fd)
        return fd

    def escape(self, key: str) -> InvalidKeyError:
        """The error for a key that would lead outside the root."""
        return InvalidKeyError(f"store key {key!r} leads outside the root of {self.owner!r} "
                               "(through a symlink)")

    # -- directories ----------------------------------------------------------------
    def dir(self, head: str, key: str, create: bool = False) -> int | None:
        """A descriptor of the directory ``head`` (``""``: the root), None if missing.
        ``create`` makes missing directories (again, if a concurrent delete prunes a
        parent meanwhile); ``key`` names the request in errors."""
        fd = self._dirs.get(head, _MISS)
        if fd is not _MISS and (fd is not None or not create) or not head:
            return fd if fd is not _MISS else self.fd  # type: ignore[return-value]
        with self._lock:
            parent_head, _, name = head.rpartition("/")
            for _ in range(_CREATE_ATTEMPTS):
                fd = self._dirs.get(head, _MISS)
                if fd is not _MISS and (fd is not None or not create):
                    return fd  # type: ignore[return-value]
                parent = self.dir(parent_head, key, create)
                if parent is None:
                    fd = None
                else:
                    try:
                        fd = self._keep(self._child(parent, parent_head, name, key, create))
                    except FileNotFoundError:  # the parent was pruned: make it again
                        self.forget(parent_head, parent)
                        continue
                self._dirs[head] = fd
                return fd
        raise OSError(errno.EAGAIN, f"directory of key {key!r} kept disappearing while "
                                    "it was being created")

    def forget(self, head: str, stale: int | None) -> None:
        """Drop ``head`` from this walk's directories if its descriptor is ``stale``
        (the directory was removed); the next ``dir(head)`` walks to it again."""
        with self._lock:
            if head and self._dirs.get(head, _MISS) == stale:
                del self._dirs[head]

    def _child(self, parent: int, parent_head: str, name: str, key: str,
               create: bool) -> int | None:
        """Open (or make) the directory ``name`` in ``parent``; FileNotFoundError when
        ``parent`` itself was removed."""
        for _ in range(_CREATE_ATTEMPTS):
            try:
                return os.open(name, DIR_FLAGS, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    os.mkdir(name, 0o777, dir_fd=parent)
                except FileExistsError:
                    pass  # another writer made it, or it is a symlink: open decides
            except NotADirectoryError:
                try:
                    is_link = stat.S_ISLNK(os.stat(name, dir_fd=parent,
                                                   follow_symlinks=False).st_mode)
                except FileNotFoundError:
                    continue  # replaced meanwhile: look again
                if is_link:
                    parts = parent_head.split("/") if parent_head else []
                    return self.beneath([*parts, name], key, DIR_FLAGS, create)
                if create:
                    raise NotADirectoryError(
                        errno.ENOTDIR, f"cannot store key {key!r}: {name!r} is a file, "
                        "not a directory") from None
                return None
            except OSError as e:  # a name no directory here can have: missing
                if e.errno != errno.ENAMETOOLONG or create:
                    raise
                return None
        raise OSError(errno.EAGAIN, f"directory of key {key!r} kept disappearing while "
                                    "it was being created")

    # -- symlink-aware lookups ---------------------------------------------------------
    def beneath(self, parts: list[str], key: str, flags: int, create: bool = False) -> int | None:
        """Open ``parts`` below the root with ``flags`` for the last component, following
        symlinks only while they stay inside the root. Returns a new descriptor (the
        caller closes it) or None when something is missing."""
        if self.fd is None:
            return None
        todo = deque(parts)
        stack: list[int] = []
        links = 0
        try:
            while todo:
                name = todo.popleft()
                if name in ("", "."):
                    continue
                if name == "..":
                    if not stack:
                        raise self.escape(key)
                    os.close(stack.pop())
                    continue
                cur = stack[-1] if stack else self.fd
                last = not todo
                try:
                    stack.append(os.open(name, flags if last else DIR_FLAGS, dir_fd=cur))
                    continue
                except FileNotFoundError:
                    if not (create and (not last or flags == DIR_FLAGS)):
                        return None
                    try:
                        os.mkdir(name, 0o777, dir_fd=cur)
                    except FileExistsError:
                        pass
                    todo.appendleft(name)
                    continue
                except OSError as e:
                    if e.errno == errno.ENAMETOOLONG and not create:
                        return None  # no file or directory here can have that name
                    if e.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise
                try:
                    target = os.readlink(name, dir_fd=cur)
                except OSError:
                    return None  # a plain file where a directory was needed, or gone
                links += 1
                if links > MAX_SYMLINKS:
                    raise InvalidKeyError(f"store key {key!r}: too many levels of symlinks")
                if target.startswith("/"):
                    inside = self._inside(target)
                    if inside is None:
                        raise self.escape(key)
                    while stack:
                        os.close(stack.pop())
                    target = inside
                todo.extendleft(reversed(target.split("/")))
            return stack.pop() if stack else os.dup(self.fd)
        finally:
            for fd in stack:
                os.close(fd)

    def _inside(self, target: str) -> str | None:
        target = os.path.normpath(target)
        for prefix in self.root.prefixes():
            if target.startswith(prefix) or target == prefix[:-1]:
                return target[len(prefix):]
        return None

    def open_file(self, dir_fd: int, head: str, name: str, key: str,
                  flags: int = FILE_FLAGS) -> int | None:
        """Open the file ``name`` of directory ``head`` (descriptor ``dir_fd``); None if
        missing. A symlink is followed only inside the root."""
        try:
            return os.open(name, flags, dir_fd=dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            if e.errno == errno.ENAMETOOLONG and not flags & os.O_CREAT:
                return None
            if e.errno != errno.ELOOP:
                raise
        parts = head.split("/") if head else []
        return self.beneath([*parts, name], key, flags)

    # -- listings and pruning ---------------------------------------------------------------
    def scan(self, head: str) -> Iterator[tuple[str, str, int, bool]]:
        """Every non-directory entry below ``head`` as ``(directory key prefix, name,
        directory descriptor, is_symlink)``, depth first (one descriptor per level);
        symlinked directories are not entered."""
        start = self.dir(head, head)
        if start is None:
            return
        stack = [(head + "/" if head else "", start, False, iter(_entries(start)))]
        try:
            while stack:
                rel, fd, _, entries = stack[-1]
                entry = next(entries, None)
                if entry is None:
                    if stack.pop()[2]:
                        os.close(fd)
                elif not entry.is_dir(follow_symlinks=False):
                    yield rel, entry.name, fd, entry.is_symlink()
                else:
                    try:
                        sub = os.open(entry.name, DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        continue  # vanished, or swapped for a symlink
                    try:
                        below = _entries(sub)
                    except OSError:
                        os.close(sub)
                        continue
                    stack.append((rel + entry.name + "/", sub, True, iter(below)))
        finally:
            for _, fd, owned, _ in stack:
                if owned:
                    os.close(fd)

    def is_file(self, parts: list[str], key: str) -> bool:
        """Whether ``parts`` (a symlink, typically) resolves to a regular file inside
        the root (False when it leads outside)."""
        try:
            fd = self.beneath(parts, key, FILE_FLAGS)
        except InvalidKeyError:
            return False
        if fd is None:
            return False
        try:
            return stat.S_ISREG(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def prune(self, head: str) -> None:
        """Remove ``head`` and its parents while they are empty (never the root)."""
        while head:
            parent_head, _, name = head.rpartition("/")
            parent = self.dir(parent_head, head)
            if parent is None:
                return
            try:
                os.rmdir(name, dir_fd=parent)
            except OSError as e:
                if e.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.EBUSY,
                               errno.ENOTDIR, errno.ENAMETOOLONG):
                    return
                raise
            self.forget(head, self._dirs.get(head))
            head = parent_head


def _dirs_per_slice() -> int:
    """Directories one step of a batch holds open at most (each is a file descriptor):
    256, or an eighth of the process's descriptor limit if that is less."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return 256 if soft == resource.RLIM_INFINITY else max(16, min(256, soft // 8))


DIRS_PER_SLICE = _dirs_per_slice()


def dir_slices(located: Sequence[tuple[str, str]]) -> list[range]:
    """Consecutive index ranges of ``located`` that each touch at most
    ``DIRS_PER_SLICE`` directories (a batch is done slice by slice)."""
    slices, start, seen = [], 0, set()
    for i, (head, _) in enumerate(located):
        if head not in seen:
            if len(seen) >= DIRS_PER_SLICE:
                slices.append(range(start, i))
                start, seen = i, set()
            seen.add(head)
    slices.append(range(start, len(located)))
    return slices


def name_max(root: str | os.PathLike[str]) -> int:
    """The longest file name (in bytes) the file system of ``root`` (or of its nearest
    existing parent: it may not exist yet) takes."""
    path = os.path.abspath(root)
    while True:
        try:
            return int(os.pathconf(path, "PC_NAME_MAX"))
        except (OSError, ValueError):
            parent = os.path.dirname(path)
            if parent == path:
                return _NAME_MAX
            path = parent


def refuse_long_names(key: str, limit: int, where: str) -> None:
    """``OSError(ENAMETOOLONG)`` naming ``key`` and ``where`` when a component of ``key``
    is longer than ``limit`` bytes: no file can have that name, so the write is refused
    before any directory is made for it."""
    if len(key) * 4 <= limit:  # no character takes more than 4 bytes: nothing to check
        return
    for part in key.split("/"):
        size = len(os.fsencode(part))
        if size > limit:
            raise OSError(errno.ENAMETOOLONG, f"cannot store key {key!r} in {where}: its "
                          f"component {part[:24]!r}... is {size} bytes, longer than the "
                          f"{limit} a file name may have here")
