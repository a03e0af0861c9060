"""Which hosts a blamed build is rolled back on, and to what.

A campaign whose stage failed, with blame naming one of its versions, puts every host that got
that version back on the version it had before (``on_failure: rollback``). What "before" was
comes from the record of installs (each ``updated`` entry says what it replaced), never from
the campaign's memory, so a host changed by anyone is rolled back the same way. Driver and CUDA
are one consistency pair: a host rolled back on either gets both back as they were before that
change, so a job never sees a driver with the wrong CUDA.

The hosts fall in two kinds, handled by two paths of the same drain/verify core:

- hosts in service (or held in maintenance by someone): a bulk operation per set of previous
  versions drains them with care for their jobs, reinstalls, verifies and returns them;
- hosts the bad build took out of service (quarantined, or in the repair their triage sent them
  to): the campaign reclaims them (no job to drain), reinstalls, verifies and returns them.

Hosts whose previous version the record does not know are left as they are and listed.
Pure: the callers read the fleet and its record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from orchestrator.contracts.constants import REPAIR_STATES
from orchestrator.contracts.models import UPPER_LAYER

#: States of hosts the bad build may have taken out, which the campaign reclaims to roll back.
RECLAIMABLE = REPAIR_STATES


@dataclass(frozen=True)
class Install:
    """One ``updated`` entry of the record: a host's components before and after a change."""

    host: str
    before: Mapping[str, str | None]
    after: Mapping[str, str]


@dataclass
class RollbackPlanned:
    """Per cluster: in-service hosts grouped by the versions they go back to, reclaimable ones."""

    groups: list[tuple[dict[str, str], list[str]]] = field(default_factory=list)
    reclaim: dict[str, dict[str, str]] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)  # carry it, previous version not recorded


def previous_versions(
    installs: Iterable[Install], blamed: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """host -> component -> version it had before its latest install of a blamed version.

    The latest such install counts (a host rolled back and changed again is judged by its last
    change). For driver/CUDA, both components of that install's ``before`` are taken together.
    """
    out: dict[str, dict[str, str]] = {}
    for ins in installs:
        got = [c for c, v in blamed.items() if ins.after.get(c) == v]
        if not got:
            continue
        comps = set(got)
        if comps & UPPER_LAYER:
            comps |= {c for c in UPPER_LAYER if c in ins.after}
        prev = {c: ins.before.get(c) for c in sorted(comps)}
        known = {c: str(v) for c, v in prev.items() if v}
        if len(known) == len(prev):
            out.setdefault(ins.host, {}).update(known)
        else:
            out.pop(ins.host, None)  # a first install with nothing before: nothing to go back to
    return out


def plan_rollback(
    hosts: Iterable[tuple[str, str, Mapping[str, str]]],
    previous: Mapping[str, Mapping[str, str]],
    blamed: Mapping[str, str],
) -> RollbackPlanned:
    """Sort the hosts (name, state, versions) carrying a blamed version into the two paths."""
    out = RollbackPlanned()
    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for name, state, versions in hosts:
        if not any(versions.get(c) == v for c, v in blamed.items()):
            continue
        prev = previous.get(name)
        if not prev:
            out.unknown.append(name)
            continue
        back = {c: v for c, v in prev.items() if versions.get(c) != v}
        if not back:
            continue
        if state in RECLAIMABLE:
            out.reclaim[name] = back
        else:
            groups.setdefault(tuple(sorted(back.items())), []).append(name)
    out.groups = [(dict(key), sorted(names)) for key, names in sorted(groups.items())]
    return out
