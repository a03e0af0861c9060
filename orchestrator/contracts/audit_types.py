"""What the audit reports: the kinds of broken invariant it finds in the event log, and the
report ``trainctl audit --json`` prints (``orchestrator.audit`` finds them).

Violation kinds:

- ``budget_exceeded``: right after a cordon that carried a budget (``limit``, ``per_rack``,
  ``per_zone``), more hosts of the cluster, rack or zone are out of service than it allowed, or
  (``maintenance``) more hosts are held for planned work by every owner together than it allowed.
- ``mixed_versions``: a job started on hosts whose ``gpu_driver``/``cuda`` differ, or an update
  changed ``gpu_driver``/``cuda`` under a running job.
- ``unverified_return``: a host returned to service after maintenance (from ``in_maintenance``
  or ``verifying``, or after any update since it left service) without its latest verification,
  after its last update, having passed. Returns of untouched cordoned hosts and from repair are
  fine.
- ``host_lost``: at the end of the log, a host out of service that is neither in repair nor
  quarantined, and whose holder has closed (or that never had one): nobody will ever bring it
  back. (An owner is ended once its ``owner_closed`` is recorded.)
- ``stale_return``: a host returned to service missing a target pending for it: back from repair
  without every target recorded for its cluster, or back from maintenance by an owner without
  the targets that owner had recorded when it took the host (unless it rolled the host back to
  its previous versions, as a failed wave does: a target recorded mid-visit, as a second
  campaign riding the train records its own, binds the owner's later visits, not this one).
  A visit's install says what it meant the host to carry (``updated``'s ``targets``): a
  campaign's rollout riding the train gives its version of a component over the owner's.
  Hosts merely not yet visited by a sliding rollout are fine.
- ``scope_incomplete``: an operation closed as ``succeeded`` while a host of its recorded scope
  (``operation_scope``) is not on its targets and not quarantined or in repair (where repair
  gives it the recorded targets before it serves).
- ``two_owners``: a host taken by one owner while another still holds it (a lost update).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

KINDS = (
    "budget_exceeded",
    "mixed_versions",
    "unverified_return",
    "host_lost",
    "stale_return",
    "scope_incomplete",
    "two_owners",
)


class Violation(BaseModel):
    """One broken invariant, located in the log."""

    kind: str
    cluster: str
    host: str | None = None
    t: float = Field(description="Fleet hours of the event that broke it.")
    seq: int = Field(description="Event sequence number (0 for end-of-log findings).")
    detail: str


class AuditReport(BaseModel):
    """What the audit found: ``ok`` is true when there is no violation."""

    ok: bool
    violations: list[Violation]
    events_checked: int
    #: visits recorded in place (``checked``: nothing pending, never drained), apart from the
    #: drained visits the host states and installs record
    hosts_checked_in_place: int = 0
