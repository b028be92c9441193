"""The ``info`` tables of arrays and groups (plain text, and HTML for notebooks)."""

from __future__ import annotations

import html


def human_bytes(n: float) -> str:
    """``1234567`` -> ``'1.2M'`` (binary multiples, as zarr-python prints)."""
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1024 or unit == "P":
            return f"{n:.0f}" if unit == "" else f"{n:.1f}{unit}"
        n /= 1024
    return str(n)


class InfoTable:
    """Rows of (name, value); prints aligned, renders as an HTML table in notebooks."""

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        self.rows = rows

    def __repr__(self) -> str:
        width = max((len(k) for k, _ in self.rows), default=0)
        return "\n".join(f"{k:<{width}} : {v}" for k, v in self.rows)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows)
        return f"<table>{body}</table>"

    def __getitem__(self, key: str) -> str:
        return dict(self.rows)[key]
