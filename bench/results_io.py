"""How a bench writes its JSON: atomically (a temporary file renamed over it), so a run
stopped mid-write, or rewriting after each finished case, never leaves half a file."""

from __future__ import annotations

import json
from pathlib import Path


def write_json(path: str | Path, doc: dict, indent: int | None = 2, default=str) -> Path:  # noqa: ANN001
    """`doc` as JSON at `path` (folders made); the path written. `default`: what a value JSON
    has no type for becomes (str; a bench of numpy scalars may give float)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=indent, default=default) + "\n")
    tmp.replace(out)
    return out
