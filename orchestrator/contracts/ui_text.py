"""Markdown for the Temporal UI: summaries and current details written for the on-call engineer.

The UI renders a workflow's summary and its current details as markdown (in a sandboxed frame),
and each activity's and child's summary in the event history. On-call reads them, not queries,
so they say in plain words what is happening and what it waits for, never a Python repr. The
server caps user metadata (summaries a few hundred bytes, details tens of KiB), and a
``meta-24k`` domain or wave can hold thousands of hosts, so everything here is bounded: tables
stop after ``MAX_ROWS`` rows and say how many more there are, details stop at
``DETAILS_LIMIT`` bytes. Pure functions over plain data, deterministic, so workflows call them
freely (the module is passed through the sandbox) and a changed wording never changes a
workflow's commands: the server keeps user metadata beside a command, not in what replay
compares.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from orchestrator.contracts.messages import OwnerCost

#: Longest one-line summary (the server's default cap on a summary payload is 400 bytes).
SUMMARY_LIMIT = 200
#: Longest current details, in UTF-8 bytes (well inside the server's and the UI's limits).
DETAILS_LIMIT = 16_000
#: Rows of a host or cluster table before the rest is summarised in one line.
MAX_ROWS = 40

#: How a train's wait begins when the budget is full; who holds it follows after ": ".
BUDGET_EXHAUSTED = "budget exhausted"
#: The planner's and the arbiter's short reasons, said so an on-call engineer understands them.
_WAITS = {
    "domain full": "the train already has as many hosts in maintenance as its domain size allows",
    "no host due": "every host left this cycle is busy elsewhere (in maintenance or repair)",
    "budget exhausted": "the capacity budget is used up: no host may leave service until one "
    "comes back",
    "gathering slots for a job worth evicting": "every host left runs a job; waiting until "
    "enough maintenance slots free up that evicting one job frees many hosts at once",
    "ahead of the cycle target: evicting no job": "every host left runs a job and the cycle is "
    "well ahead of its target: waiting for jobs to end or fail rather than stopping one",
    "ahead of the cycle target: sparing large jobs": "every host left runs a large job and "
    "the cycle is ahead of its target: waiting for those jobs to end or fail rather than "
    "stopping one (a large job's restart is paid by all its GPUs)",
    "waiting": "no host fits the budget's per-rack or per-zone limits right now",
}
#: What a drain does about a job on a cordoned host (``JobWait.action``).
_ACTIONS = {
    "wait_end": "to end",
    "evict_after_checkpoint": "to checkpoint, then evict it",
    "evict_now": "to be evicted now",
}


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 host``, ``2 hosts``; ``many`` for irregular plurals (``plural(2, "is", "are")``)."""
    return f"{n:,} {word if n == 1 else (many or word + 's')}"


def duration(hours: float) -> str:
    """A span of fleet time as people read it: ``40 s``, ``2 min``, ``1 h 30 min``, ``7 d``,
    ``2 d 4 h`` (never ``0.0333333h``); past a day, minutes no longer matter."""
    secs = round(abs(hours) * 3600)
    if secs < 60:
        return f"{secs} s"
    mins = round(secs / 60)
    if mins < 60:
        return f"{mins} min"
    if mins < 24 * 60:
        h, m = divmod(mins, 60)
        return f"{h} h" + (f" {m} min" if m else "")
    d, h = divmod(round(secs / 3600), 24)
    return f"{d} d" + (f" {h} h" if h else "")


def md_plain(text: str) -> str:
    """``text`` as literal markdown: ``[``, ``]``, ``<`` and ``>`` escaped outside code spans.

    The UI's renderer read a cluster glob ``c0[123]`` as "c0" and a link "123", and drops what
    reads as an HTML tag; inside backticks the text is already literal and stays as written.
    """
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts lie outside code spans
        parts[i] = re.sub(r"([\[\]<>])", r"\\\1", parts[i])
    return "`".join(parts)


def one_line(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """A summary: one line, at most ``limit`` characters (cut with an ellipsis)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def bounded(markdown: str, limit: int = DETAILS_LIMIT) -> str:
    """``markdown`` cut at a line boundary to at most ``limit`` UTF-8 bytes, saying so."""
    if len(markdown.encode()) <= limit:
        return markdown
    note = "\n\n_(details cut here to stay within the UI's size limit; query the workflow)_"
    out: list[str] = []
    size = len(note.encode())
    for line in markdown.split("\n"):
        size += len(line.encode()) + 1
        if size > limit:
            break
        out.append(line)
    return "\n".join(out) + note


def names(items: Sequence[str], limit: int = 6) -> str:
    """``a, b and c``; past ``limit`` names, ``a, b, ... and 42 more``."""
    items = list(items)
    if not items:
        return "none"
    if len(items) > limit:
        return ", ".join(items[:limit]) + f" and {len(items) - limit:,} more"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def versions(targets: Mapping[str, str | None]) -> str:
    """``os 6.8.0-45, bios 3.2`` (versions exactly as written)."""
    return ", ".join(f"{k} {v}" for k, v in sorted(targets.items())) or "no version change"


#: An operation's wait for room as runs recorded before the ``ops-room-wait-text`` patch word
#: it, hours as decimals (later runs give durations: ``ops.ui.room_wait_text``).
_ROOM_WAIT = re.compile(
    r"waits for room, at most (\d+(?:\.\d+)?) h more \(max_wait_for_room (\d+(?:\.\d+)?) h\)"
)


def _room_wait(m: re.Match[str]) -> str:
    left, most = float(m.group(1)), float(m.group(2))
    return f"waits for room, at most {duration(left)} more (max_wait_for_room {duration(most)})"


def explain_wait(reason: str) -> str:
    """A planner's or arbiter's reason in plain words (unknown ones pass through; an
    operation's wait for room gives its hours as durations)."""
    reason = _ROOM_WAIT.sub(_room_wait, reason)
    if reason in _WAITS:
        return _WAITS[reason]
    if reason.startswith(f"{BUDGET_EXHAUSTED}: "):
        return f"{_WAITS[BUDGET_EXHAUSTED]}; held: {reason[len(BUDGET_EXHAUSTED) + 2 :]}"
    if reason.startswith("handing over to "):
        return f"handing the cluster over to {reason[16:]}, which must run alone on it"
    if reason.startswith("serialised behind "):
        return f"waiting for {reason[18:]} to hand back its hosts first"
    if reason.startswith("budget shared with "):
        return f"the capacity budget is shared with {reason[19:]}"
    return reason


def at_hour(at: float, now: float) -> str:
    """``fleet hour 12.5 (in 2 h 18 min)``: when, and how far off, in fleet time."""
    ahead = at - now
    when = "now" if abs(ahead) < 0.05 else (f"in {duration(ahead)}" if ahead > 0 else "overdue")
    return f"fleet hour {at:.1f} ({when})"


def job_wait(job_id: int, action: str, at: float, now: float) -> str:
    """``waits for job 17 to end, by fleet hour 40.0 (in 3 h 6 min)``."""
    return f"waits for job {job_id} {_ACTIONS.get(action, action)}, by {at_hour(at, now)}"


def item_list(
    headers: Sequence[str], rows: Iterable[Sequence[object]], what: str = "hosts"
) -> list[str]:
    """One bullet per row, ``- **first** · header: value · ...``, at most ``MAX_ROWS``, then
    how many more. Not a markdown table: the UI draws tables without cell padding, so columns
    ran together ("holdsgrantedwants", "Draining0/5"); ``key: value`` reads the same anywhere."""
    rows = list(rows)
    out = []
    for row in rows[:MAX_ROWS]:
        first, *rest = row
        fields = " · ".join(f"{h}: {_cell(v)}" for h, v in zip(headers[1:], rest, strict=True))
        out.append(f"- **{_cell(first)}**" + (f" · {fields}" if fields else ""))
    if len(rows) > MAX_ROWS:
        out.append(f"- _... and {len(rows) - MAX_ROWS:,} more {what} (query the workflow)_")
    return out


def host_list(rows: Iterable[tuple[str, str, str]], what: str = "hosts") -> list[str]:
    """One bullet per host, ``host — phase: note``, at most ``MAX_ROWS``, then how many more.

    Bullets rather than a table: the UI draws markdown tables without cell padding, and a
    host's wait reads as a sentence.
    """
    rows = list(rows)
    out = [f"- `{h}` **{phase}**: {_cell(note)}" for h, phase, note in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        out.append(f"- _... and {len(rows) - MAX_ROWS:,} more {what} (query the workflow)_")
    return out


def no_html(text: str) -> str:
    """``text`` with ``<`` and ``>`` escaped for markdown: the UI's renderer drops what reads
    as an HTML tag, so an error such as ``<urlopen error [Errno 111] Connection refused>``
    vanished from the page, leaving the reason that holds a stage blank (and it shows
    entities such as ``&lt;`` as they are written: a backslash it is). Brackets too
    (``md_plain``)."""
    return md_plain(text)


def _cell(value: object) -> str:
    return md_plain(" ".join(str(value).split()).replace("|", "\\|")) or "-"


def tally(states: Iterable[str]) -> str:
    """``5 updating, 2 draining, 1 quarantined`` (most first, then by name)."""
    counts: dict[str, int] = {}
    for s in states:
        counts[s] = counts.get(s, 0) + 1
    return ", ".join(
        f"{n:,} {s}" for s, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    )


def cost_item(c: OwnerCost | None) -> list[str]:
    """``- **Cost to jobs:** ...``: what an owner has cost the jobs, as it last read the
    fleet's record (nothing before it first did)."""
    if c is None:
        return []
    parts = ", ".join(f"{p} {v:,.1f}" for p, v in c.parts.items())
    return [
        f"- **Cost to jobs:** {c.total_gpu_hours:,.1f} GPU-h ({parts}); "
        f"{c.jobs_stopped:,} job(s) stopped, {c.ettr_points_lost:.2f} ETTR points lost by them"
    ]
