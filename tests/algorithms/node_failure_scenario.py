"""Node loss on a local 2-node Ray cluster (run by test_fault_tolerance_e2e.py in its own process, since a
``ray.cluster_utils.Cluster`` cannot share a process with another Ray instance). Prints one JSON line.

The head node has no CPUs, so both env runners (1 CPU each) start on the second node. That node is removed
mid-run and a fresh one added: the runners come back there and the iteration re-samples their groups. Then the
new node is removed too, with no replacement: the next iteration fails with a clear message."""

import json
import sys
import tempfile
import time
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from ragen_rllib import RagenConfig


def node_of(algo):
    return sorted(algo.env_runner_group.foreach_env_runner(lambda r: ray.get_runtime_context().get_node_id(),
                                                           local_env_runner=False))


def main(temp_dir: str) -> None:
    Path(tempfile.gettempdir(), "ray").mkdir(parents=True, exist_ok=True)  # Ray writes the cluster address there
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "temp_dir": temp_dir})
    second = cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, log_to_driver=False)
    config = (RagenConfig()
              .environment("ragen/FrozenLake-v0", env_config={"size": 4, "success_rate": 1.0})
              .env_runners(num_env_runners=2)
              .rl_module(model_config={"model": "tiny:nano", "autocast": None})
              .training(adv_estimator="grpo", env_groups=2, group_size=2, minibatch_size=4, max_turns=2,
                        max_response_tokens=16, lr=1e-3, engine="hf")
              .fault_tolerance(env_runner_health_probe_timeout_s=45)  # restarts on a new node: >15 s on slow CPUs
              .debugging(seed=0))
    algo = config.build_algo()
    out = {"nodes_before": node_of(algo), "second": second.node_id}
    algo.train()
    cluster.remove_node(second)
    third = cluster.add_node(num_cpus=2)
    start = time.perf_counter()
    result = algo.train()
    out.update(recovery_s=time.perf_counter() - start, third=third.node_id,
               groups_lost=result["env_runners"]["groups_lost"], restored=result["env_runners"]["runners_restored"],
               episodes=[result["env_runners"]["num_episodes"]])
    extra = 0  # a runner may answer a probe while Ray is still restarting it: at most a few more iterations
    while algo.env_runner_group.num_healthy_remote_workers() < 2 and extra < 4:
        out["episodes"].append(algo.train()["env_runners"]["num_episodes"])
        extra += 1
    out.update(nodes_after=node_of(algo), extra_iterations=extra)
    cluster.remove_node(third)  # no node will come
    try:
        algo.train()
        out["error"] = None
    except Exception as err:  # the message a user sees
        out["error"] = f"{type(err).__name__}: {err}"
    print(json.dumps(out, default=float), flush=True)
    ray.shutdown()
    cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
