"""What `train start` and `train reconfigure` check against the fleet before they steer a
train: the cluster exists, the budget leaves room for a host (and a whole rack with a
``switch_firmware`` target), the domain fits the cluster, the targets may roll out here (bad
versions, the skew window, install hooks, what ``supersedes`` names); and the target and
budget options as the CLI takes them. Each refusal is ``BadInput`` naming its field.
"""

from __future__ import annotations

import pydantic

from orchestrator.app.cli.common import BadInput, field_of, open_fleet_or_fail
from orchestrator.contracts.models import (
    CapacityBudget,
    check_targets,
)
from orchestrator.contracts.train_spec import TrainSpec
from orchestrator.contracts.train_types import TrainChange, TrainStatus
from orchestrator.contracts.version_checks import check_supersedes, check_supersedes_targets
from orchestrator.execution.target_checks import target_refusal
from orchestrator.planning.rack_plan import rack_fits_budget
from orchestrator.planning.spec_fit import fit_train


def check_spec_against_fleet(spec: TrainSpec) -> int:
    """Refuse a spec naming an unknown cluster or a budget below one host; return hosts."""
    fleet = open_fleet_or_fail()
    try:
        _require_cluster(spec.cluster, fleet.cluster_names())
        hosts = fleet.preset.hosts_per_cluster
        rack_hosts = fleet.preset.hosts_per_rack
        # A backend that knows no rack switches (Slurm) cannot update them: refused here.
        switches = "switch_firmware" not in spec.targets or bool(
            fleet.peek(spec.cluster).rack_switches()
        )
        # A version marked bad, or one more version in service than the skew window allows.
        refused = target_refusal(fleet, [spec.cluster], spec.targets, spec.skew, spec.supersedes)
    finally:
        fleet.close()
    if refused is not None:
        raise BadInput(refused[1], field=refused[0])
    if not switches:
        raise BadInput(
            f"targets.switch_firmware: cluster {spec.cluster!r} has no rack switches this "
            "fleet's backend can update (a Slurm cluster's switches are not Slurm's to change)",
            field="targets.switch_firmware",
        )
    try:
        spec.budget.require_hosts(hosts)
    except ValueError as err:
        raise BadInput(str(err)) from None
    if spec.domain_size > hosts:  # refused, not silently more than the cluster
        raise BadInput(
            f"domain_size: {spec.domain_size} hosts at once, but cluster {spec.cluster} has "
            f"{hosts}",
            field="domain_size",
        )
    if "switch_firmware" in spec.targets:  # a rack visit takes the whole rack out at once
        why = rack_fits_budget(spec.budget, hosts, rack_hosts)
        if why:
            raise BadInput(why, field=why.split(":", 1)[0])
    return hosts


def fit_spec_to_cluster(spec: TrainSpec, hosts: int) -> tuple[TrainSpec, list[str]]:
    """``spec`` with its domain clamped to its maintenance budget on ``hosts`` hosts, as the
    simulator runs it, and the warnings to show: the clamp, a cycle target out of reach."""
    fit = fit_train(spec.domain_size, spec.budget, hosts, spec.targets, spec.cycle_target_hours)
    if fit.domain.clamped:
        spec = spec.model_copy(update={"domain_size": fit.domain.effective})
    return spec, fit.warnings


def _require_cluster(cluster: str, names: list[str]) -> None:
    if cluster not in names:
        more = ", ..." if len(names) > 5 else ""
        raise BadInput(
            f"cluster: unknown cluster {cluster!r} (known: {', '.join(names[:5])}{more})",
            field="cluster",
        )


def check_cluster_in_fleet(cluster: str, domain_size: int | None = None) -> None:
    """Exit 2 for a cluster the fleet does not have, as `train start` does, or a domain larger
    than the cluster (``domain_size``).

    Without a fleet here (the CLI may steer trains of workers elsewhere) there is nothing to
    check against, and the train's own answer decides.
    """
    from orchestrator.fleet import fleet_store, open_fleet, store_exists

    if not store_exists(fleet_store()):
        return
    fleet = open_fleet()
    try:
        names = fleet.cluster_names()
        _require_cluster(cluster, names)
        hosts = fleet.hosts_in(cluster)
    finally:
        fleet.close()
    if domain_size is not None and domain_size > hosts:
        raise BadInput(
            f"domain_size: {domain_size} is more than the {hosts} hosts of {cluster}",
            field="domain_size",
        )


def supersedes_options(given: tuple[str, ...], targets: dict[str, str]) -> dict[str, str]:
    """``--supersedes component=version`` options checked against the ``--target`` ones."""
    pairs: dict[str, str] = {}
    for t in given:
        comp, sep, ver = t.partition("=")
        if not sep or not comp.strip():
            raise BadInput(f"supersedes: {t!r} is not component=version", field="supersedes")
        pairs[comp.strip()] = ver.strip()
    try:
        return check_supersedes_targets(check_supersedes(pairs), targets)
    except ValueError as err:
        raise BadInput(str(err)) from None


def parse_target_options(targets: tuple[str, ...] | list[str]) -> dict[str, str]:
    """``--target component=version`` options as a validated mapping, versions exactly as typed.

    The version is text from the command line and stays text (``os=6.10`` is ``"6.10"``);
    errors name ``target`` or the component.
    """
    pairs: dict[str, object] = {}
    for t in targets:
        comp, sep, ver = t.partition("=")
        comp = comp.strip()
        if not sep or not comp:
            raise BadInput(f"target: {t!r} is not component=version")
        if comp in pairs:
            raise BadInput(f"target: {comp} given twice")
        pairs[comp] = ver.strip()
    try:
        return check_targets(pairs, allow_upper=False)
    except ValueError as err:
        raise BadInput(f"target.{err}") from None


def check_change_against_fleet(
    cluster: str, budget: CapacityBudget, targets: dict[str, str], hosts_total: int
) -> int:
    """The budget and targets a reconfigured train would run with, held to the rules of
    ``train start`` (``check_spec_against_fleet``): at least one host under each limit, and a
    whole rack under them while a ``switch_firmware`` target is set. Without a fleet here
    (workers elsewhere) the train's own size stands in and the rack rule is the train's.
    Returns the cluster's hosts as judged (0: unknown)."""
    from orchestrator.fleet import fleet_store, store_exists

    hosts, rack_hosts = hosts_total, 0
    if store_exists(fleet_store()):
        fleet = open_fleet_or_fail()
        try:
            hosts = fleet.preset.hosts_per_cluster
            rack_hosts = fleet.preset.hosts_per_rack
        finally:
            fleet.close()
    if hosts:
        try:
            budget.require_hosts(hosts)
        except ValueError as err:
            raise BadInput(str(err)) from None
    if "switch_firmware" in targets and hosts and rack_hosts:
        why = rack_fits_budget(budget, hosts, rack_hosts)
        if why:
            raise BadInput(why, field=why.split(":", 1)[0])
    return hosts


def fit_change(
    change: TrainChange, current: TrainStatus, hosts: int
) -> tuple[TrainChange, list[str]]:
    """``change`` with the domain the train will run after it clamped to its budget on
    ``hosts`` hosts (as ``train start`` does), and the warnings to show; nothing to fit on a
    train that has not counted its hosts yet with no fleet here (``hosts`` 0)."""
    if not hosts:
        return change, []
    domain = change.domain_size or current.domain_size
    budget = change.budget or current.budget
    targets = {**current.targets, **(change.targets or {})}
    fit = fit_train(domain, budget, hosts, targets, current.cycle_target_hours)
    if fit.domain.clamped:
        change = change.model_copy(update={"domain_size": fit.domain.effective})
    return change, fit.warnings


def merged_budget(current: CapacityBudget, given: dict[str, object]) -> CapacityBudget:
    """``current`` with only the ``given`` fields changed (``--budget`` is the floor alone);
    BadInput naming the ``budget.<field>`` at fault when they do not fit together."""
    try:
        return CapacityBudget.model_validate({**current.model_dump(), **given})
    except pydantic.ValidationError as err:
        first = err.errors()[0]
        msg = str(first["msg"]).removeprefix("Value error, ")
        loc = ".".join(str(p) for p in first["loc"])
        text = f"{loc}: {msg}" if loc and not msg.startswith(f"{loc}:") else msg
        name = loc or field_of(text) or "max_unavailable"
        text = text if text.startswith("budget") else f"budget.{text}"
        field = name if name.startswith("budget") else f"budget.{name}"
        raise BadInput(text, field=field) from None
