"""The drain policies the simulator compares, and the tools whose behaviour each baseline mimics.

Every policy is the *same* planning code (``orchestrator.planning.train_plan``): the policy name
selects the branch of ``choose_domain`` (which hosts next) and ``drain_step`` (how to drain a
host's job). The engine paces every policy's pipeline as the live train does (whenever fewer
than ``domain_size`` hosts are in flight, ask for more; a verified host goes back at once), so
``simulate --policy P`` predicts ``train start`` with ``policy: P``. For every policy, a host
that repair hands back with updates pending is due (it waits cordoned for whatever maintains
the fleet, as the train's ``plan_domain`` activity has it), and a quarantined host is due again
once repaired.

``job-aware`` (ours, the train's default)
    A continuous pipeline: whenever fewer than ``domain_size`` hosts are in flight, ask for more.
    Take repaired hosts that wait for updates first (already out, no extra budget), then idle
    hosts, then hosts of jobs that end within minutes (a short wait, no interruption), then whole
    jobs to evict, the one covering most free slots first and, among those, the one whose hosts
    come free soonest. A job is evicted only when it fills 60% of the free room (or is the
    largest left), right after its next checkpoint, so almost no work is lost; jobs that end
    within the drain deadline are waited for instead, and the planner asks to be woken when they
    come within minutes of their end.

``rolling-serial`` (kured with a concurrency of N; Ansible ``serial: N`` with the ``free`` strategy)
    Hosts in inventory order, at most ``domain_size`` in flight. Each host is cordoned and drained
    with no regard for its job's checkpoints (``kubectl drain`` evicts the pods, the job dies with
    the work since its last checkpoint), and goes back as soon as it is verified. Ansible's default
    ``linear`` strategy, which holds a finished host until its whole batch is done, is not
    modelled: the live train has no such mode, and the simulator decides as the live train does.

``drain-wait`` (the NVIDIA GPU Operator's driver upgrade controller)
    ``maxParallelUpgrades`` = ``domain_size`` nodes in flight, new nodes picked in node order as
    slots free up. Each node is cordoned, then ``waitForCompletion`` waits for its pods up to a
    timeout (``--max-wait``), after which ``drain`` deletes them whatever their progress.

``none`` (the baseline)
    No train at all: the same seed, trace, failures and repairs. A run of a policy over a fixed
    horizon is judged against it (``simulate --horizon``: goodput lost to maintenance).

``slurm-asap`` (``scontrol reboot ASAP nextstate=RESUME <nodes>``)
    Nodes handed to Slurm in node order, at most ``domain_size`` at a time: each is drained (no new
    jobs) and reboots into maintenance as soon as it is idle, with no deadline: no job is ever
    killed, but a node of a three-day job is held for three days.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.contracts.train_spec import POLICIES


@dataclass(frozen=True)
class PolicySpec:
    """One drain policy and the tool it models."""

    name: str
    source: str
    """The tool and behaviour the policy models."""


POLICY_SPECS: dict[str, PolicySpec] = {
    "job-aware": PolicySpec("job-aware", "trainctl maintenance train (this project)"),
    "rolling-serial": PolicySpec(
        "rolling-serial", "kured / Ansible serial (free): inventory order, evict at once"
    ),
    "drain-wait": PolicySpec(
        "drain-wait", "NVIDIA GPU Operator upgrade controller: parallel cap, drain timeout"
    ),
    "slurm-asap": PolicySpec("slurm-asap", "scontrol reboot ASAP: drain, reboot when idle"),
}
assert tuple(POLICY_SPECS) == POLICIES
#: The baseline with no planned maintenance: the same seed, trace, failures and repairs, no train.
NONE = "none"
NONE_SPEC = PolicySpec(NONE, "no planned maintenance (the baseline a schedule is judged against)")
#: Every policy ``simulate`` takes: the drain policies, then the baseline.
SIM_POLICIES: dict[str, PolicySpec] = {**POLICY_SPECS, NONE: NONE_SPEC}


def get_policy(name: str) -> PolicySpec:
    """The spec of policy ``name`` (the drain policies and ``none``), or ValueError naming
    ``policy``."""
    try:
        return SIM_POLICIES[name]
    except KeyError:
        raise ValueError(
            f"policy: unknown policy {name!r} (known: {', '.join(SIM_POLICIES)})"
        ) from None
