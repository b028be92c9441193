"""Who wrote something, and whether that writer is gone.

Things a writer leaves in a store while it works (temporary files, pending marks in
consolidated copies, rechunk intermediates) name it by :data:`HOST_ID` and its PID, so that
a later process can tell a dead writer's leftovers from a live writer's work. A PID only
means something within one kernel boot and one PID namespace, so the identity is the host
name, the kernel's boot id (``/proc/sys/kernel/random/boot_id``, new at every boot and
different on every host) and the inode of the PID namespace. The namespace inode alone is
not enough: the initial namespace has the same inode on every Linux host, so two hosts of
one name on shared storage would each take the other's live writers for dead.

Without a boot id (not Linux) no process can be proven to be on this host: the identity
is then unique to this process, and other processes' leftovers are judged by age only.

A writer is *dead here* (:func:`dead_here`) only when it carries this exact identity and
its process is gone, or its PID now belongs to a process started at another time. Names
in an older format (before the boot id was part of the identity) never equal the current
identity, so they are never taken for dead: they go by age, as a remote writer's do.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def host_identity(boot_id: str | None = None) -> str:
    """``<host name>/boot:<boot id>/pidns:<inode>``, the identity of this host and PID
    namespace (``boot_id``: for tests; by default read from the kernel). Without a boot
    id: an identity unique to this process (``.../proc:<random>``)."""
    if boot_id is None:
        try:
            with open(_BOOT_ID, encoding="ascii") as f:
                boot_id = f.read().strip()
        except (OSError, ValueError):
            boot_id = ""
    try:
        namespace = str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        namespace = ""
    if not boot_id:
        return f"{socket.gethostname()}/proc:{uuid.uuid4().hex}"
    return f"{socket.gethostname()}/boot:{boot_id}/pidns:{namespace}"


def host_tag(identity: str) -> str:
    """A short hash of ``identity`` for file names: 16 hex digits (older names carried 8,
    so they never equal a current tag)."""
    return hashlib.sha1(identity.encode()).hexdigest()[:16]


#: this process's host identity (computed once: it names this process's writes)
HOST_ID = host_identity()
#: its short form, in temporary file names
HOST_TAG = host_tag(HOST_ID)


def process_start(pid: int) -> int | None:
    """When the process ``pid`` of this PID namespace started (clock ticks since boot),
    or None when that cannot be read (no such process, not Linux)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as f:
            stat = f.read()
        # the command name (field 2) may hold spaces and parentheses: split after it
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, OverflowError, ValueError):
        return True  # exists (owned by someone else), or cannot be asked: assume alive
    return True


def process_gone(pid: int, start: int | None = None) -> bool:
    """Whether the process ``pid`` of this host no longer runs; with ``start`` (its
    :func:`process_start` when it wrote), also when the PID now names a later process."""
    if pid <= 0:
        return False  # 0 and negatives name process groups, never a writer
    if start is not None:
        now = process_start(pid)
        if now is not None and now != start:
            return True
    if pid == os.getpid():
        return False
    return not _pid_alive(pid)


def dead_here(host: str, pid: int, start: int | None = None) -> bool:
    """Whether the writer ``(host, pid[, start])`` is a process of this host and PID
    namespace that is gone. Any other identity (another host, an older format) is never
    dead by this test: only its age can tell."""
    return host == HOST_ID and process_gone(pid, start)
