"""What one trial asks Ray for, and whether (and how many times at once) a cluster can hold it.

A trial's request is RLlib's own (``Algorithm.default_resource_request``): a placement group of bundles, one for
the driver (with the local learner when ``num_learners=0``), one per env runner, per evaluation runner and per
remote learner. Each bundle must fit on one node; the bundles of one trial may spread over nodes (RLlib's ``PACK``
strategy). ``ragen-rllib plan`` prints this; ``train`` and ``sweep`` refuse a trial that no cluster node can hold
before Tune starts it (Tune would otherwise wait for resources forever).

A cluster is written ``"2 nodes x 8 CPUs, 1 GPU"``; groups of different nodes are joined with ``;`` and custom
resources are ``name=amount``: ``"1 node x 4 CPUs; 2 nodes x 8 CPUs, 1 GPU, rollout=1"``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

Resources = dict[str, float]

_GROUP = re.compile(r"^\s*(?:(\d+)\s*nodes?\s*[x*]\s*)?(.+?)\s*$", re.IGNORECASE)
_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(cpus?|gpus?)\s*$", re.IGNORECASE)
_CUSTOM = re.compile(r"^\s*([A-Za-z_][\w.-]*)\s*=\s*(\d+(?:\.\d+)?)\s*$")
CLUSTER_EXAMPLE = '"2 nodes x 8 CPUs, 1 GPU" (groups joined by ";", custom resources as name=amount)'


@dataclass(frozen=True)
class TrialPlan:
    """One trial's placement group: ``bundles`` as ``(role, resources)``, in RLlib's order."""

    bundles: tuple[tuple[str, Resources], ...]
    strategy: str

    @property
    def total(self) -> Resources:
        out: Resources = {}
        for _, res in self.bundles:
            for key, amount in res.items():
                out[key] = out.get(key, 0.0) + amount
        return out


def trial_plan(config) -> TrialPlan:
    """The placement group RLlib asks for one trial of ``config``, each bundle named by its role."""
    pgf = config.algo_class.default_resource_request(config)
    bundles = [{k: float(v) for k, v in b.items() if v} for b in pgf.bundles]
    roles = ["driver" + (" + local learner" if config.num_learners == 0 else "")]
    roles += [f"env runner {i + 1}" for i in range(config.num_env_runners)]
    roles += [f"evaluation runner {i + 1}" for i in range(config.evaluation_num_env_runners or 0)]
    roles += [f"learner {i + 1}" for i in range(config.num_learners)]
    if len(roles) != len(bundles):  # a layout this labelling does not know: number them instead
        roles = [f"bundle {i}" for i in range(len(bundles))]
    return TrialPlan(tuple(zip(roles, bundles)), pgf.strategy)


def parse_cluster(spec: str) -> list[Resources]:
    """One resource dict per node from e.g. ``"2 nodes x 8 CPUs, 1 GPU"``; ValueError naming the bad part."""
    nodes: list[Resources] = []
    for group in filter(str.strip, spec.split(";")):
        match = _GROUP.match(group)
        count, body = int(match.group(1) or 1), match.group(2)
        node: Resources = {}
        for part in body.split(","):
            if amount := _AMOUNT.match(part):
                node["CPU" if amount.group(2).lower().startswith("cpu") else "GPU"] = float(amount.group(1))
            elif custom := _CUSTOM.match(part):
                node[custom.group(1)] = float(custom.group(2))
            else:
                raise ValueError(f"--cluster {spec!r}: cannot read {part.strip()!r}; write it like {CLUSTER_EXAMPLE}")
        if count < 1 or not node:
            raise ValueError(f"--cluster {spec!r}: {group.strip()!r} names no node; write it like {CLUSTER_EXAMPLE}")
        nodes += [dict(node) for _ in range(count)]
    if not nodes:
        raise ValueError(f"--cluster {spec!r} names no node; write it like {CLUSTER_EXAMPLE}")
    return nodes


def _fits(need: Resources, free: Resources) -> bool:
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in need.items())


def place(plan: TrialPlan, free: list[Resources]) -> bool:
    """Place one trial on ``free`` (node resources, reduced in place when it fits): largest bundles first, each
    on the first node that holds it. Returns whether every bundle found a node (``free`` is unchanged if not)."""
    trial = [dict(n) for n in free]
    for _, need in sorted(plan.bundles, key=lambda b: -sum(b[1].values())):
        node = next((n for n in trial if _fits(need, n)), None)
        if node is None:
            return False
        for k, v in need.items():
            node[k] = node.get(k, 0.0) - v
    free[:] = trial
    return True


def concurrent_trials(plan: TrialPlan, nodes: list[Resources], limit: int = 10_000) -> int:
    """How many trials of ``plan`` the cluster runs at once (0: not even one)."""
    free = [dict(n) for n in nodes]
    count = 0
    while count < limit and place(plan, free):
        count += 1
    return count


FIX = ("Fix: lower env_runners.num_cpus_per_env_runner / num_gpus_per_env_runner / custom_resources_per_env_runner, "
       "env_runners.num_env_runners or learners.num_cpus_per_learner / num_gpus_per_learner, or give Ray more "
       "(run.ray_init: {num_cpus: N, resources: {...}} when a run starts Ray itself, or add nodes); "
       "`ragen-rllib plan CONFIG` shows the request.")


def check_fits(plan: TrialPlan, nodes: list[Resources], where: str) -> None:
    """ValueError, naming the bundle, the keys and the fix, when one trial cannot be placed on ``nodes``."""
    if concurrent_trials(plan, nodes, limit=1):
        return
    largest = {k: max(n.get(k, 0.0) for n in nodes) for k in {k for _, b in plan.bundles for k in b}}
    for role, need in plan.bundles:
        if not any(_fits(need, n) for n in nodes):
            short = ", ".join(f"{k} {v:g} (largest node: {largest.get(k, 0.0):g})" for k, v in need.items()
                              if v > largest.get(k, 0.0) + 1e-9)
            raise ValueError(f"one trial cannot start on {where}: its {role} needs {_fmt(need)} on one node, and "
                             f"no node has {short}. {FIX}")
    have: Resources = {}
    for node in nodes:
        for k, v in node.items():
            have[k] = have.get(k, 0.0) + v
    parts = "; ".join(f"{role}: {_fmt(res)}" for role, res in plan.bundles)
    raise ValueError(f"one trial cannot start on {where}: it needs {_fmt(plan.total)} in all ({parts}), and the "
                     f"cluster has {_fmt({k: have.get(k, 0.0) for k in plan.total})}. {FIX}")


def _fmt(res: Resources) -> str:
    return ", ".join(f"{v:g} {k}" for k, v in sorted(res.items())) or "nothing"


def describe(plan: TrialPlan, nodes: list[Resources], where: str, max_concurrent: int | None = None) -> str:
    """The plan as text: each bundle, the trial's total, the cluster and how many trials run at once on it."""
    lines = [f"one trial ({plan.strategy}: bundles may spread over nodes, each bundle on one node):"]
    lines += [f"  {role:<28} {_fmt(res)}" for role, res in plan.bundles]
    lines += [f"  {'total':<28} {_fmt(plan.total)}", f"cluster ({where}):"]
    lines += [f"  node {i + 1:<23} {_fmt(n)}" for i, n in enumerate(nodes)]
    at_once = concurrent_trials(plan, nodes)
    capped = f" (tune.max_concurrent_trials: {max_concurrent})" if max_concurrent and max_concurrent < at_once else ""
    lines.append(f"trials at once: {min(at_once, max_concurrent or math.inf):g}{capped}" if at_once
                 else "trials at once: 0 -- one trial does not fit (see the error below)")
    return "\n".join(lines)


_RAY_INTERNAL = ("memory", "object_store_memory")


def cluster_nodes() -> list[Resources]:
    """The alive nodes of the Ray this process is connected to (CPUs, GPUs, custom resources)."""
    import ray

    return [{k: float(v) for k, v in n["Resources"].items() if k not in _RAY_INTERNAL and not k.startswith("node:")
             and not k.startswith("accelerator_type:")} for n in ray.nodes() if n.get("Alive")]


def local_node(ray_init: dict) -> Resources:
    """The node a run started here gets: ``run.ray_init``'s ``num_cpus``/``num_gpus``/``resources``, else what
    this process may use (its CPU affinity; CUDA devices)."""
    import os

    import torch

    node: Resources = {"CPU": float(ray_init.get("num_cpus") or len(os.sched_getaffinity(0)))}
    gpus = ray_init.get("num_gpus", torch.cuda.device_count())
    if gpus:
        node["GPU"] = float(gpus)
    node.update({k: float(v) for k, v in (ray_init.get("resources") or {}).items()})
    return node


def check_cluster(config, joined: bool, log=print) -> None:
    """Before Tune starts a trial of ``config`` on the running Ray: a Ray this run started itself that cannot hold
    one trial is an error (Tune would wait forever); a joined cluster may still grow (autoscaling), so a warning."""
    try:
        check_fits(trial_plan(config), cluster_nodes(), "the connected Ray cluster" if joined else
                   "the Ray this run started on this machine")
    except ValueError as err:
        if not joined:
            raise
        log(f"warning: {err}")
