"""One glob at a time, without ``fnmatch``'s compiled-pattern cache: its literal parts, a
matcher per glob, its tokens and its longest literal run, and the bitmask helpers the shapes
of ``scope_patterns`` are built from. Same semantics as ``fnmatchcase``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from fnmatch import translate

_META = "*?["
Matcher = Callable[[str], object]


_Part = tuple[int, tuple[tuple[int, str], ...]]
"""Literal characters and ``?`` between two stars: its length, its literal runs (offset, text)."""


def _part(glob: str) -> _Part:
    return len(glob), tuple((m.start(), m.group()) for m in re.finditer(r"[^?]+", glob))


def _fits(text: str, pos: int, part: _Part) -> bool:
    """``part`` matches ``text`` at ``pos``."""
    length, runs = part
    if pos + length > len(text):
        return False
    return all(text.startswith(run, pos + offset) for offset, run in runs)


def _find(text: str, part: _Part, start: int, stop: int) -> int:
    """The leftmost position in ``[start, stop - length]`` where ``part`` fits, or -1."""
    length, runs = part
    if len(runs) == 1 and len(runs[0][1]) == length:  # no ?
        return text.find(runs[0][1], start, stop)
    for pos in range(start, stop - length + 1):
        if _fits(text, pos, part):
            return pos
    return -1


def _plain(pattern: str) -> Matcher:
    """fnmatchcase for a glob of ``*``, ``?`` and literals: fixed-length parts between the
    stars, the first anchored at the start, the last at the end, the others leftmost."""
    if "*" not in pattern:
        whole = _part(pattern)
        return lambda text: len(text) == whole[0] and _fits(text, 0, whole)
    head, *middle, tail = map(_part, pattern.split("*"))
    least = head[0] + tail[0] + sum(p[0] for p in middle)

    def match(text: str) -> bool:
        if len(text) < least or not _fits(text, 0, head):
            return False
        end = len(text) - tail[0]
        if not _fits(text, end, tail):
            return False
        pos = head[0]
        for part in middle:
            found = _find(text, part, pos, end)
            if found < 0:
                return False
            pos = found + part[0]
        return True

    return match


def glob_matcher(pattern: str) -> Matcher:
    """fnmatchcase(text, pattern) as a function of text, without fnmatch's bounded cache."""
    if "[" in pattern:
        return re.compile(translate(pattern)).match
    return _plain(pattern)


def glob_tokens(glob: str) -> list[str]:
    """fnmatch's tokens of a glob: ``*``, ``?``, a set ``[...]`` or one literal character."""
    if "[" not in glob:
        return list(glob)
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        i += 1
        if c == "[":  # a set as fnmatch reads it: a leading ! and then a leading ] belong to it
            j = i + (i < n and glob[i] == "!")
            j += j < n and glob[j] == "]"
            end = glob.find("]", j)
            if end >= 0:
                out.append(glob[i - 1 : end + 1])
                i = end + 1
                continue
        out.append(c)  # (an unclosed [ is a literal)
    return out


def _literal(token: str) -> bool:
    return len(token) == 1 and token not in "*?"


def longest_literal_run(tokens: Sequence[str]) -> str:
    """The longest run of literal characters among ``tokens``."""
    best, run = "", ""
    for token in tokens:
        run = run + token if _literal(token) else ""
        if len(run) > len(best):
            best = run
    return best


def bitmask(ids: Iterable[int], n: int) -> int:
    bits = bytearray((n + 7) // 8)
    for i in ids:
        bits[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(bits, "little")


def set_bits(mask: int) -> list[int]:
    """The positions of the set bits of ``mask``."""
    out = []
    if mask.bit_count() <= 8:
        while mask:
            low = mask & -mask
            out.append(low.bit_length() - 1)
            mask ^= low
        return out
    digits = bin(mask)[:1:-1]  # lowest bit first
    i = digits.find("1")
    while i >= 0:
        out.append(i)
        i = digits.find("1", i + 1)
    return out
