"""What every part of a Runtime is (``current().part(Kind)``): a class defined by the
layer that keeps the state, constructed with no argument."""

from __future__ import annotations


class Part:
    """State a layer keeps per process, in the Runtime rather than a module global.

    Override :meth:`forked` for what a forked child keeps, and :meth:`close` for what
    must be released when the Runtime closes; by default a child starts without the
    part (made again on first use) and closing does nothing."""

    def forked(self) -> Part | None:
        """The forked child's part, or None: the child makes a new one when it asks."""
        return None

    def close(self) -> None:
        """Release what the part holds (:meth:`Runtime.close`)."""
