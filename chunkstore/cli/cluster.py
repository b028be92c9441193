"""Running the command's Dask work on a ``distributed`` cluster, with the same progress
lines as a local run: connecting to a scheduler (a refused connection fails at once),
the local cluster of ``demo``, and the dashboard link printed wherever a cluster is made
or used.

A scheduler plugin (:class:`TaskCounter`, which the scheduler unpickles by name, so it
needs chunkstore installed, as every service of ``docker-compose.yml`` has) records the
tasks submitted and finished; a thread of the command polls it and feeds a
:class:`~chunkstore.progress.TaskProgress`.
"""

from __future__ import annotations

import importlib.util
import socket
import threading
import uuid
from collections.abc import Hashable, Iterable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any, TextIO

from distributed import Client
from distributed.diagnostics.plugin import SchedulerPlugin

from chunkstore.cli.errors import CLIError
from chunkstore.progress import TaskProgress

CONNECT_TIMEOUT = "10s"
#: seconds the first TCP probe of a scheduler may take (a refused port answers at once)
PROBE_TIMEOUT = 10.0
#: the oldest bokeh dask's dashboard runs with (older or none: its pages say so instead)
BOKEH_MIN = (3, 1)
#: what to install for the dashboard
BOKEH_HINT = "pip install 'bokeh>=3.1', or the [cluster] extra of chunkstore"


def _probe(address: str) -> None:
    """Fail at once, naming ``address``, when nothing listens there (distributed itself
    retries a refused connection until its timeout). Only plain ``tcp://host:port``
    addresses are probed; others are left to distributed."""
    scheme, _, rest = address.partition("://") if "://" in address else ("", "", address)
    if scheme not in ("", "tcp") or not rest:
        return
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        return
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT):
            pass
    except socket.gaierror as e:
        raise CLIError(f"cannot connect to the Dask scheduler at {address!r}: unknown host "
                       f"{host!r} ({e.strerror or e})") from None
    except ConnectionRefusedError:
        raise CLIError(f"cannot connect to the Dask scheduler at {address!r}: connection "
                       "refused (is a scheduler running there? start one with 'dask "
                       "scheduler')") from None
    except TimeoutError:  # nothing answers: distributed would wait as long again
        raise CLIError(f"cannot connect to the Dask scheduler at {address!r}: no answer "
                       f"within {PROBE_TIMEOUT:.0f} s") from None
    except OSError:  # an unreachable network...: distributed says more
        pass


def connect(address: str) -> Client:
    """A client of the scheduler at ``address``; a one-line error if it cannot be reached
    (at once when the connection is refused)."""
    _probe(address)
    try:
        return Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as e:
        raise CLIError(f"cannot connect to the Dask scheduler at {address!r} within "
                       f"{CONNECT_TIMEOUT}: {e}") from e


def bokeh_installed() -> bool:
    """Whether a bokeh that dask's dashboard runs with (>= 3.1) is importable here."""
    if importlib.util.find_spec("bokeh") is None:
        return False
    try:
        version = tuple(int(p) for p in metadata.version("bokeh").split(".")[:2])
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return version >= BOKEH_MIN


def dashboard_line(client: Client) -> str:
    """``dashboard: http://host:port/status`` for the cluster of ``client``, or why there is
    no working one (no dashboard, or a scheduler without bokeh)."""
    try:
        link = client.dashboard_link
    except (KeyError, AttributeError):  # the scheduler runs no dashboard service
        link = None
    if not link:
        return "dashboard: none (the scheduler runs without a dashboard)"
    try:
        ok = client.run_on_scheduler(bokeh_installed)
    except Exception:  # a scheduler without chunkstore: say the link, unchecked
        return f"dashboard: {link}"
    if not ok:
        return (f"dashboard: none ({link} would only say that the scheduler lacks bokeh: "
                f"{BOKEH_HINT} where the scheduler runs)")
    return f"dashboard: {link}"


@contextmanager
def local_cluster(workers: int, stream: TextIO, *, processes: bool = True) -> Iterator[Client]:
    """A ``LocalCluster`` of ``workers`` processes (threads with ``processes=False``) x 1
    thread and its client, on 127.0.0.1 only, with the dashboard on a free port when bokeh
    is installed; prints the dashboard line on ``stream`` (the link, or how to get one)."""
    from distributed import LocalCluster

    dashboard = "127.0.0.1:0" if bokeh_installed() else None
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                      protocol="tcp", host="127.0.0.1",
                      dashboard_address=dashboard) as cluster, \
            Client(cluster) as client:
        if dashboard is None:
            print(f"dashboard: none (bokeh is not installed: {BOKEH_HINT})", file=stream)
        else:  # the scheduler runs here, with this bokeh: no need to ask it
            print(f"dashboard: {cluster.dashboard_link}", file=stream)
        stream.flush()
        yield client


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
