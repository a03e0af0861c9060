"""Scope patterns at scale: which of tens of thousands of globs match a name, fast.

A bulk operation's scope may list tens of thousands of zone, rack or host patterns
(``benchmarks/bench_scope.py``), and ``ScopeFilter`` must also know which of them matched
nothing (a typo must not silently shrink an operation). The semantics are ``fnmatchcase``'s;
matching is near-linear in names plus patterns: literal patterns (no ``*``, ``?`` or ``[``) are
a set; globs are grouped by shape (how many one-character tokens before their first and after
their last star), and a shape tries a name against all its globs at once through per-position
bitmasks; the few globs whose ends say less than some literal text between their stars are
keyed by that text. Each name credits every glob it matches, and once every pattern has
matched something a name stops at its first match. Nothing goes through fnmatch's cache of
compiled patterns (past its 32,768 entries every call recompiled, which made 40,000 globs
stall). Apart from ``ops_scope`` because it is a matcher, not a planner: it knows nothing of
hosts or operations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from fnmatch import translate
from typing import Any

from orchestrator.planning.glob_match import (
    bitmask,
    glob_matcher,
    glob_tokens,
    longest_literal_run,
    set_bits,
)

_META = "*?["
#: A group of globs keyed by inner text holding more than this many is tried through combined
#: regexes rather than one glob at a time.
_FEW = 16
#: Globs per combined regex (at most 256: a glob's number in it is one character).
_CHUNK = 256

Matcher = Callable[[str], object]


# ----------------------------------------------------------------------- groups of globs
class _Shape:
    """Globs of one shape: ``head`` one-character tokens (literal, ``?`` or a set), then, when
    ``star``, any text, then ``tail`` one-character tokens; without a star, ``head`` tokens.

    Per position it keeps, as bitmasks, which of its globs accept which character, so a text is
    tried against all of them at once: the AND of the masks of its characters is the globs
    whose head and tail fit. Those match, except the ones that need something between two
    stars (``a*-r01-*b``), which are then checked one by one.
    """

    def __init__(self, field: PatternField, star: bool, head: int, tail: int) -> None:
        self.field = field
        self.star = star
        self.width = head + tail
        self.offsets = [*range(head), *range(-tail, 0)]
        self.globs: list[str] = []
        self.left = 0  # globs not credited yet
        self._ends: list[list[str]] = []  # each glob's head and tail tokens, until built
        self._middled: list[int] = []
        self._credited = 0
        self._built = False
        self._tables: list[dict[str, int]] = []  # position -> character -> globs accepting it

    def add(self, glob: str, ends: list[str], middled: bool) -> None:
        if middled:
            self._middled.append(len(self.globs))
        self.globs.append(glob)
        self._ends.append(ends)
        self.left += 1

    def _build(self) -> None:
        n = len(self.globs)
        self._all = (1 << n) - 1
        self._middle = bitmask(self._middled, n)
        width = len(self.offsets)
        lits: list[dict[str, list[int]]] = [{} for _ in range(width)]
        sets: list[dict[str, list[int]]] = [{} for _ in range(width)]
        wild: list[list[int]] = [[] for _ in range(width)]
        for g, ends in enumerate(self._ends):
            for pos, token in enumerate(ends):
                if token == "?":
                    wild[pos].append(g)
                elif len(token) == 1:
                    lits[pos].setdefault(token, []).append(g)
                else:
                    sets[pos].setdefault(token, []).append(g)
        self._lit = [{c: bitmask(ids, n) for c, ids in d.items()} for d in lits]
        self._wild = [bitmask(ids, n) for ids in wild]
        self._sets = [
            [(self.field.matcher(t), bitmask(ids, n)) for t, ids in d.items()] for d in sets
        ]
        self._tables = [{} for _ in range(width)]
        self._ends = []
        self._built = True

    def _accepting(self, pos: int, c: str) -> int:
        found = self._lit[pos].get(c, 0) | self._wild[pos]
        for accepts, mask in self._sets[pos]:
            if accepts(c):
                found |= mask
        self._tables[pos][c] = found
        return found

    def scan(self, text: str, need: bool) -> bool:
        """Whether a glob here matches ``text``; credits every one not credited yet that does."""
        n = len(text)
        if n < self.width or (n > self.width and not self.star):
            return False
        if not self._built:
            self._build()
        fit = self._all
        for pos, off in enumerate(self.offsets):
            c = text[off]
            mask = self._tables[pos].get(c)
            fit &= self._accepting(pos, c) if mask is None else mask
            if not fit:
                return False
        sure = fit & ~self._middle
        found = sure != 0
        new = sure & ~self._credited
        maybe = fit & self._middle
        if maybe and ((need and not found) or maybe & ~self._credited):
            for g in set_bits(maybe):
                done = self._credited >> g & 1
                if done and (found or not need):
                    continue
                if self.field.matcher(self.globs[g])(text):
                    found = True
                    new |= 0 if done else 1 << g
        if new:
            self._credited |= new
            for g in set_bits(new):
                self.field.credit(self.globs[g])
                self.left -= 1
        return found


class _Globs:
    """Globs sharing one literal text somewhere between their stars, tried one at a time (or,
    past ``_FEW``, through combined regexes); ``scan`` as for a shape."""

    def __init__(self, field: PatternField) -> None:
        self.field = field
        self.globs: list[str] = []
        self.left = 0  # globs not credited yet
        self._chunks: list[list[Any]] | None = None  # [regex, globs, left]

    def add(self, glob: str) -> None:
        self.globs.append(glob)
        self.left += 1

    def scan(self, text: str, need: bool) -> bool:
        if len(self.globs) <= _FEW:
            return self._scan_few(text, need)
        return self._scan_chunks(text, need)

    def _credit(self, glob: str) -> None:
        self.field.credit(glob)
        self.left -= 1

    def _scan_few(self, text: str, need: bool) -> bool:
        found = False
        credited = self.field.credited
        for glob in self.globs:
            done = glob in credited
            if done and (found or not need):
                continue
            if self.field.matcher(glob)(text):
                found = True
                if not done:
                    self._credit(glob)
        return found

    def _scan_chunks(self, text: str, need: bool) -> bool:
        if self._chunks is None:
            # Glob k of a chunk is its regex's group gk, behind a class that lets it match only
            # when the text is led by chr(j) with j <= k: led by chr(k + 1) the regex finds the
            # next glob after k that matches, so finding every match takes one call each.
            self._chunks = []
            for i in range(0, len(self.globs), _CHUNK):
                chunk = self.globs[i : i + _CHUNK]
                rx = "|".join(
                    f"[\\x00-\\x{k:02x}](?P<g{k}>{translate(g)})" for k, g in enumerate(chunk)
                )
                left = sum(g not in self.field.credited for g in chunk)
                self._chunks.append([re.compile(rx), chunk, left])
        found = False
        credited = self.field.credited
        for entry in self._chunks:
            rx, chunk, left = entry
            if not left and (found or not need):
                continue
            start = 0
            while start < len(chunk):
                m = rx.match(chr(start) + text)
                if m is None or m.lastgroup is None:
                    break
                found = True
                k = int(m.lastgroup[1:])
                if chunk[k] not in credited:
                    self._credit(chunk[k])
                    entry[2] -= 1
                if not entry[2]:
                    break
                start = k + 1
        return found


_Group = _Shape | _Globs


# ------------------------------------------------------------------------------ one field
class PatternField:
    """The patterns of one scope field (``scope.hosts``) and which of them matched a name.

    Literals are a set. A glob goes to the shape of its head and tail (the one-character tokens
    before its first and after its last star); one with stars whose inner literal text is
    longer than its literal head and tail is keyed by that text instead, and the few with no
    literal text at all are tried on every name. A name tries only the shapes of its length and
    the globs whose inner text it holds, and every name that matches credits every glob it
    matches, until all have matched something.
    """

    def __init__(self, field: str, patterns: Sequence[str]) -> None:
        self.field = field
        self.patterns = list(patterns)
        self.hit = bytearray(len(self.patterns))
        self.credited: set[str] = set()
        self.left = 0  # globs not credited yet
        self._where: dict[str, list[int]] = {}  # pattern -> its positions in the list
        self._literals: set[str] = set()
        self._matchers: dict[str, Matcher] = {}
        self._verdicts: dict[str, bool] = {}
        self._shapes: dict[tuple[bool, int, int], _Shape] = {}
        self._inner: dict[str, _Globs] = {}  # inner literal text -> globs
        self._anywhere = _Globs(self)
        for i, pattern in enumerate(self.patterns):
            self._where.setdefault(pattern, []).append(i)
        for pattern in self._where:
            if not any(c in pattern for c in _META):
                self._literals.add(pattern)
            else:
                self._add_glob(pattern)
        shapes = sorted(self._shapes.values(), key=lambda s: s.width)
        self._exact = {s.width: s for s in shapes if not s.star}
        self._starred = [s for s in shapes if s.star]
        self._run_lengths = sorted({len(k) for k in self._inner})

    def _add_glob(self, glob: str) -> None:
        self.left += 1
        tokens = glob_tokens(glob)
        stars = [i for i, t in enumerate(tokens) if t == "*"]
        if not stars:
            self._shape(False, len(tokens), 0).add(glob, tokens, False)
            return
        head, tail = tokens[: stars[0]], tokens[stars[-1] + 1 :]
        middle = [t for t in tokens[stars[0] : stars[-1]] if t != "*"]
        run = longest_literal_run(tokens[stars[0] : stars[-1]])
        pinned = sum(t != "?" for t in head + tail)
        if (head or tail) and len(run) <= pinned:
            self._shape(True, len(head), len(tail)).add(glob, head + tail, bool(middle))
        elif run:
            self._inner.setdefault(run, _Globs(self)).add(glob)
        else:
            self._anywhere.add(glob)

    def _shape(self, star: bool, head: int, tail: int) -> _Shape:
        key = (star, head, tail)
        if key not in self._shapes:
            self._shapes[key] = _Shape(self, star, head, tail)
        return self._shapes[key]

    def matcher(self, glob: str) -> Matcher:
        found = self._matchers.get(glob)
        if found is None:
            found = self._matchers[glob] = glob_matcher(glob)
        return found

    def credit(self, pattern: str) -> None:
        """``pattern`` matched a name: every position it has in the list is matched."""
        for i in self._where[pattern]:
            self.hit[i] = 1
        if pattern not in self._literals:
            self.credited.add(pattern)
            self.left -= 1

    def ok(self, name: str, cluster: str) -> bool:
        verdict = self._verdicts.get(name)
        if verdict is None:
            short = name.removeprefix(cluster + "-")
            forms = (name,) if short == name else (name, short)
            verdict = self._verdicts[name] = self._match(forms)
        return verdict

    def _match(self, forms: tuple[str, ...]) -> bool:
        matched = False
        for form in forms:
            if form in self._literals:
                if not self.hit[self._where[form][0]]:
                    self.credit(form)
                matched = True
        for form in forms:
            for group in self._candidates(form):
                if matched and not self.left:
                    return True
                if (group.left or not matched) and group.scan(form, need=not matched):
                    matched = True
        return matched

    def _candidates(self, text: str) -> Iterator[_Group]:
        """The groups of globs that may match ``text``."""
        n = len(text)
        exact = self._exact.get(n)
        if exact is not None:
            yield exact
        for shape in self._starred:
            if shape.width > n:
                break
            yield shape
        if self._run_lengths:
            runs = {text[i : i + r] for r in self._run_lengths for i in range(n - r + 1)}
            for run in runs:
                globs = self._inner.get(run)
                if globs is not None:
                    yield globs
        if self._anywhere.globs:
            yield self._anywhere

    def unmatched(self) -> str | None:
        """The first pattern (in list order) that matched no name, or None."""
        i = self.hit.find(0)
        return None if i < 0 else self.patterns[i]
