"""Run by tests/run/test_ray_init.py in its own process: start a local Ray with ``init_ray``, start one named actor,
then print one JSON line (the Ray processes' listening sockets, the node addresses, the dashboard's actor list)
and wait to be killed."""

import json
import os
import sys
import time
import urllib.request

import psutil
import ray

from ragen_rllib import init_ray


@ray.remote(num_cpus=0)
class Probe:
    def ping(self) -> int:
        return 1


def main(temp_dir: str) -> None:
    context = init_ray(num_cpus=1, _temp_dir=temp_dir, log_to_driver=False)
    probe = Probe.options(name="ragen_probe").remote()
    ray.get(probe.ping.remote())
    sockets = []
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:
            sockets += [[proc.pid, c.laddr.ip, c.laddr.port] for c in proc.net_connections(kind="inet")
                        if c.status == psutil.CONN_LISTEN]
        except psutil.Error:
            continue
    actors = []
    token = open(os.environ["RAY_AUTH_TOKEN_PATH"]).read().strip()
    url = f"http://{context.dashboard_url}/api/v0/actors?limit=100"
    for _ in range(120):  # the dashboard's state API answers a few seconds after ray.init (30 s)
        try:
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=5) as r:
                actors = json.load(r)["data"]["result"]["result"]
            if any(a.get("name") == "ragen_probe" for a in actors):
                break
        except OSError:
            pass
        time.sleep(0.25)
    print(json.dumps({
        "dashboard_url": context.dashboard_url,
        "node_ips": [n["NodeManagerAddress"] for n in ray.nodes()],
        "gcs_address": context.address_info["gcs_address"],
        "sockets": sockets,
        "actor_names": [a.get("name") for a in actors],
        "token_path": os.environ["RAY_AUTH_TOKEN_PATH"],
        "descendants": [[p.pid, p.create_time()] for p in psutil.Process().children(recursive=True)],
    }), flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1])
