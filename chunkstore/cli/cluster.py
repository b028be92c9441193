"""Running the command's Dask work on a ``distributed`` cluster, with the same progress
lines as a local run.

A scheduler plugin (:class:`TaskCounter`, which the scheduler unpickles by name, so it
needs chunkstore installed, as every service of ``docker-compose.yml`` has) records the
tasks submitted and finished; a thread of the command polls it and feeds a
:class:`~chunkstore.progress.TaskProgress`.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin

from ..progress import TaskProgress
from .errors import CLIError

CONNECT_TIMEOUT = "10s"


def connect(address: str) -> Client:
    """A client of the scheduler at ``address``; a one-line error if it cannot be reached."""
    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as e:
        raise CLIError(f"cannot connect to the Dask scheduler at {address!r} within "
                       f"{CONNECT_TIMEOUT}: {e}") from e


class TaskCounter(SchedulerPlugin):
    """Records the tasks submitted and finished on the scheduler until drained."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.added: list[Hashable] = []
        self.done: list[Hashable] = []

    def update_graph(self, scheduler: Any, *, tasks: Iterable[Hashable] = (),
                     **kwargs: Any) -> None:
        """A client submitted a graph: remember its tasks."""
        self.added.extend(tasks)

    def transition(self, key: Hashable, start: str, finish: str, *args: Any,
                   **kwargs: Any) -> None:
        """A task changed state: remember it if it just finished."""
        if start == "processing" and finish == "memory":
            self.done.append(key)

    def drain(self) -> tuple[list[Hashable], list[Hashable]]:
        """The tasks added and finished since the last call."""
        added, done = self.added, self.done
        self.added, self.done = [], []
        return added, done


def _drain(dask_scheduler: Any, name: str) -> tuple[list[Hashable], list[Hashable]]:
    plugin = dask_scheduler.plugins.get(name)
    return plugin.drain() if plugin is not None else ([], [])


@contextmanager
def distributed_progress(client: Client, tasks: TaskProgress, interval: float = 0.2
                         ) -> Iterator[None]:
    """Feed ``tasks`` from the cluster's computations while the block runs. Without the
    plugin (a scheduler lacking chunkstore) the block runs without progress lines."""
    plugin = TaskCounter(f"chunkstore-progress-{uuid.uuid4().hex[:12]}")
    try:
        client.register_plugin(plugin)
    except Exception:  # progress is a nicety: the work itself must still run
        yield
        return
    stop = threading.Event()

    def poll() -> None:
        added, done = client.run_on_scheduler(_drain, name=plugin.name)
        tasks.add(added)
        for key in done:
            tasks.finished(key)

    def loop() -> None:
        while not stop.wait(interval):
            try:
                poll()
            except Exception:  # the cluster went away: the computation reports it
                return

    thread = threading.Thread(target=loop, name="chunkstore-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        try:
            poll()
            client.unregister_scheduler_plugin(plugin.name)
        except Exception:  # never hide the computation's own outcome
            pass
