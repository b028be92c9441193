"""Errors of the command line: every failure becomes one line on stderr and exit status 2."""

from __future__ import annotations

import zipfile

from chunkstore.errors import ChunkstoreError

#: exit status of a failure caused by the input or the environment
EXIT_ERROR = 2
#: longest error line printed (the rest is cut, with a mark)
MAX_MESSAGE = 600


class CLIError(Exception):
    """A failure explained for the user; its message is printed as it is."""


def _one_line(text: str) -> str:
    line = " ".join(part.strip() for part in text.splitlines() if part.strip())
    return line if len(line) <= MAX_MESSAGE else line[:MAX_MESSAGE - 5] + " ..."


def explain(exc: BaseException, can_overwrite: bool = False) -> str:
    """The one-line message for ``exc``; ``can_overwrite``: the command has ``--overwrite``.

    >>> explain(FileExistsError("an array already exists at 'x'"), can_overwrite=True)
    "an array already exists at 'x' (pass --overwrite to replace it)"
    """
    text = str(exc) or type(exc).__name__
    if isinstance(exc, CLIError):
        message = text
    elif isinstance(exc, FileExistsError):
        message = text + (" (pass --overwrite to replace it)" if can_overwrite else "")
    elif isinstance(exc, zipfile.BadZipFile):
        message = f"not a valid zip archive (not a zip file, or a truncated one): {text}"
    elif isinstance(exc, RecursionError):
        message = "a metadata document is nested too deeply to be parsed"
    elif isinstance(exc, ImportError):
        missing = getattr(exc, "name", None)
        message = (f"the package {missing!r} is not installed (pip install {missing})"
                   if missing and not text.startswith("Please install") else text)
    elif isinstance(exc, MemoryError):
        message = f"not enough memory{': ' + text if str(exc) else ''}"
    elif isinstance(exc, ChunkstoreError | OSError | ValueError | TypeError | LookupError | OverflowError |
                    NotImplementedError | TimeoutError):
        message = text
    else:  # a bug: say so, and how to see more
        message = (f"unexpected {type(exc).__name__}: {text} (run with --traceback for "
                   "details and please report it)")
    return _one_line(message)
