"""A small YAML writer for fixed manifest structures (no YAML library at run time).

Block mappings and sequences of mappings, sequences and scalars. Every string (keys
included) is written JSON-quoted, and a JSON string is a valid YAML double-quoted
scalar, so no value can be misread (``"no"``, ``"1e3"``, ``"null"`` stay strings).
Numbers and booleans are written plainly; empty mappings and sequences as ``{}`` / ``[]``.
"""
from __future__ import annotations

import json
from typing import Any


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if value is None:
        return "null"
    if isinstance(value, str):
        return json.dumps(value)
    raise TypeError(f"cannot write {type(value).__name__} as YAML")


def _lines(value: Any, indent: int) -> list[str]:
    pad = " " * indent
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            head = f"{pad}{json.dumps(str(key))}:"
            if isinstance(item, (dict, list)) and item:
                out += [head, *_lines(item, indent + 2)]
            else:
                out.append(f"{head} {_scalar(item) if not isinstance(item, (dict, list)) else '{}' if isinstance(item, dict) else '[]'}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                nested = _lines(item, indent + 2)
                out.append(f"{pad}- {nested[0].lstrip()}")
                out += nested[1:]
            else:
                out.append(f"{pad}- {_scalar(item) if not isinstance(item, (dict, list)) else '{}' if isinstance(item, dict) else '[]'}")
    return out


def yaml_documents(documents: list[dict], comments: list[str] | None = None) -> str:
    """The documents as one YAML stream (``---`` before each), with ``comments`` (``#`` lines) per document if given."""
    out = []
    for n, doc in enumerate(documents):
        out.append("---")
        if comments is not None:
            out.append(f"# {comments[n]}")
        out += _lines(doc, 0)
    return "\n".join(out) + "\n"
