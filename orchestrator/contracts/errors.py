"""Two words for every error (after kopf): permanent (will not heal, never retried) or temporary.

One vocabulary on both sides of Temporal. Activities raise these;
``activities.fleet_access.as_application_error`` turns a permanent one into a non-retryable
``ApplicationError`` with its ``kind`` as the type name, and every retry policy lists
``PERMANENT_KINDS`` as its non-retryable types, so a new kind cannot be forgotten by one policy
and known by another. The clients of the workflows (train, campaign, operation, schedule) raise
subclasses of ``Refused`` and ``NotFound`` (permanent: ask otherwise) and of ``TemporaryError``
(a worker not answering, an update refused for a limit); the CLI maps each family to its exit
code in one place (``orchestrator.app.cli.common.classify``). Kinds are strings recorded in
workflow histories: a kind's value never changes.
"""

from __future__ import annotations


class PermanentError(Exception):
    """An error that retrying cannot heal: bad input, a missing fleet, an unknown cluster."""

    kind = "Permanent"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class TemporaryError(Exception):
    """An error that may heal by itself (a busy database, a backend not answering yet)."""

    kind = "Temporary"

    def __init__(self, message: str = "", field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# ------------------------------------------------------------- what clients of workflows raise
class Refused(PermanentError, ValueError):
    """The request was refused as asked (a control the workflow's validator turned down, an id
    taken by another request): the caller must change it. Exit 2."""

    kind = "Refused"


class NotFound(PermanentError, LookupError):
    """Nothing by that id. ``absent``: there never was (bad input, exit 2); otherwise it was
    there and has ended, or could not be read (exit 1)."""

    kind = "NotFound"

    def __init__(self, message: str, field: str | None = None, absent: bool = True) -> None:
        super().__init__(message, field)
        self.absent = absent


class NoFleet(PermanentError):
    kind = "NoFleet"


class UnknownCluster(PermanentError, KeyError):
    """Also a KeyError: a lookup by name that found nothing."""

    kind = "UnknownCluster"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class BadSpec(PermanentError):
    kind = "BadSpec"


class FleetSchemaMismatch(PermanentError):
    kind = "FleetSchemaMismatch"


class SlurmUnknownObject(PermanentError):
    """Slurm knows no such node or job (the Slurm backend's commands)."""

    kind = "SlurmUnknownObject"


class SlurmPermissionDenied(PermanentError):
    """Slurm refused the change for this user (trainctl must run as a Slurm operator)."""

    kind = "SlurmPermissionDenied"


class SlurmRefused(PermanentError):
    """Something Slurm cannot do (inject faults, update switches): refused, exit 2."""

    kind = "SlurmRefused"


#: Type names of every permanent error: the non-retryable types of every retry policy.
PERMANENT_KINDS: tuple[str, ...] = (
    PermanentError.kind,
    NoFleet.kind,
    UnknownCluster.kind,
    BadSpec.kind,
    FleetSchemaMismatch.kind,
    SlurmUnknownObject.kind,
    SlurmPermissionDenied.kind,
    SlurmRefused.kind,
    Refused.kind,
    NotFound.kind,
)


# ------------------------------------------------------------------ how workflows end
# Type names of the ApplicationError a workflow ends with when it did not succeed (the final
# status in its details), and of a temporary refusal an activity retries: named here once, so
# every raiser and every reader (parents, clients) says the same word.
#: A bulk operation (or a cluster's part of it) failed / was aborted.
OPERATION_FAILED = "OperationFailed"
OPERATION_ABORTED = "OperationAborted"
#: An operation's check refused its plan before anything moved.
OPERATION_REFUSED = "OperationRefused"
#: A wave failed and was rolled back.
WAVE_ROLLED_BACK = "WaveRolledBack"
#: No room in the budget within ``max_wait_for_room``.
NO_ROOM = "NoRoom"
#: A campaign failed, was aborted or rolled back.
CAMPAIGN_FAILED = "CampaignFailed"
#: A train busy with another change (stopping, mid-update): asked again (temporary).
TRAIN_BUSY = "TrainBusy"
#: A stop (or a control) sent to a train that has already stopped.
TRAIN_ALREADY_STOPPED = "TrainAlreadyStopped"
