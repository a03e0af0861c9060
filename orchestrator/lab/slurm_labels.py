"""The lab's extra partitions and static node features, for testing scopes by partition,
hostlist and feature (``lab slurm up --partition gpu=h[01-04] --feature h[05-08]=a100``).

Every lab node stays in the default partition ``main``; ``--partition NAME=HOSTLIST`` adds a
partition of those nodes beside it, and ``--feature HOSTLIST=F1,F2`` gives those nodes static
features in ``slurm.conf`` (``Features=``), which trainctl keeps when it publishes its
``<component>_<version>`` ones. Errors name the field (``partition``, ``feature``).
"""

from __future__ import annotations

import re

from orchestrator.contracts.hostlist import expand_hostlist

_NAME = re.compile(r"^[A-Za-z0-9_]{1,32}$")
_FEATURE = re.compile(r"^[A-Za-z0-9_.+-]{1,64}$")


def _nodes(field: str, text: str, known: list[str]) -> list[str]:
    try:
        names = expand_hostlist(text, limit=len(known), strict=True)
    except ValueError as err:
        raise ValueError(f"{field}: {err}") from None
    unknown = [n for n in names if n not in known]
    if not names or unknown:
        raise ValueError(f"{field}: {text!r} names {unknown or 'no'} lab nodes (has {known})")
    return names


def parse_partitions(texts: list[str], known: list[str]) -> dict[str, list[str]]:
    """``NAME=HOSTLIST`` each -> partition name -> its nodes (ValueError naming partition)."""
    out: dict[str, list[str]] = {}
    for text in texts:
        name, sep, hostlist = text.partition("=")
        if not sep or not _NAME.match(name) or name == "main" or name in out:
            raise ValueError(
                f"partition: {text!r} is not NAME=HOSTLIST with a new name other than main"
            )
        out[name] = _nodes("partition", hostlist, known)
    return out


def parse_features(texts: list[str], known: list[str]) -> dict[str, list[str]]:
    """``HOSTLIST=F1,F2`` each -> node -> its static features (ValueError naming feature)."""
    out: dict[str, list[str]] = {}
    for text in texts:
        hostlist, sep, listed = text.rpartition("=")
        feats = [f for f in listed.split(",") if f]
        if not sep or not feats or not all(_FEATURE.match(f) for f in feats):
            raise ValueError(f"feature: {text!r} is not HOSTLIST=FEATURE[,FEATURE]")
        for node in _nodes("feature", hostlist, known):
            have = out.setdefault(node, [])
            have.extend(f for f in feats if f not in have)
    return out


def partition_lines(partitions: dict[str, list[str]]) -> list[str]:
    """``slurm.conf`` lines of the extra partitions (after ``main``, which stays the default)."""
    return [
        f"PartitionName={name} Nodes={','.join(nodes)} MaxTime=INFINITE State=UP "
        "OverSubscribe=EXCLUSIVE"
        for name, nodes in partitions.items()
    ]


__all__ = ["parse_features", "parse_partitions", "partition_lines"]
