"""Slurm hostlist expressions, expanded as plain text: ``h[01-03,07],x1`` -> five names.

Pure string work, so the Slurm backend (``sinfo``/``squeue`` output, ``topology.conf``), the
operation spec (``scope.nodes``) and the lab (its partitions and features) read hostlists the
same way without one importing the other. One bracket group per name, as Slurm writes them;
ranges keep their zero padding (``h[08-10]`` -> ``h08 h09 h10``).
"""

from __future__ import annotations

import re

_RANGE = re.compile(r"^(?P<prefix>[^\[\],]*)\[(?P<body>[^\]]+)\](?P<suffix>[^\[\],]*)$")
_NUMBER = re.compile(r"^[0-9]+$")


def expand_hostlist(text: str, limit: int | None = None, strict: bool = False) -> list[str]:
    """``h[01-03,07],x1`` -> ``[h01, h02, h03, h07, x1]`` (one bracket group per name).

    ``limit``: ValueError once the expression names more than that many hosts (before it
    expands them). ``strict`` (what people write, a spec's ``scope.nodes``): ValueError on a
    malformed part (``h[3-1]``, ``h[a-b]``, an unclosed bracket) rather than taking it as a
    name, as Slurm's own output is read.
    """
    out: list[str] = []
    for part in _split_top(text.strip()):
        part = part.strip()
        m = _RANGE.match(part)
        if not m:
            if strict and ("[" in part or "]" in part):
                raise ValueError(f"{part!r} is not a hostlist (one [a-b,c] group per name)")
            if part:
                out.append(part)
            continue
        for piece in m["body"].split(","):
            lo, _, hi = piece.partition("-")
            if strict and (not _NUMBER.match(lo) or (hi and not _NUMBER.match(hi))):
                raise ValueError(f"{part!r}: {piece!r} is not a number or a range of numbers")
            if not hi:
                out.append(f"{m['prefix']}{lo}{m['suffix']}")
                continue
            if strict and int(hi) < int(lo):
                raise ValueError(f"{part!r}: range {piece!r} runs backwards")
            if limit is not None and len(out) + int(hi) - int(lo) + 1 > limit:
                raise ValueError(f"names more than {limit:,} hosts")
            width = len(lo)
            out.extend(
                f"{m['prefix']}{i:0{width}d}{m['suffix']}" for i in range(int(lo), int(hi) + 1)
            )
        if limit is not None and len(out) > limit:
            raise ValueError(f"names more than {limit:,} hosts")
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "["
        depth -= ch == "]"
        cur += ch
    parts.append(cur)
    return parts


__all__ = ["expand_hostlist"]
