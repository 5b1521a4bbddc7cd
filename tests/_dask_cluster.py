"""A real ``distributed`` LocalCluster in a process of its own, for the cluster tests.

``python tests/_dask_cluster.py N`` starts a LocalCluster of N worker processes (one thread
each, nannies, 127.0.0.1 only, no dashboard), prints one JSON line
``{"address": ..., "pid": ..., "workers": {address: pid}}`` and runs until its stdin is
closed, then closes the cluster. Killing this process (SIGKILL) is a scheduler that
disappears: the scheduler lives in it, the worker processes are its children.
"""

import json
import os
import sys


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            worker_dashboard_address=None,
        ) as cluster,
        Client(cluster, set_as_default=False) as client,
    ):
        client.wait_for_workers(n)
        pids = client.run(os.getpid)
        print(
            json.dumps({"address": cluster.scheduler_address, "pid": os.getpid(), "workers": pids}),
            flush=True,
        )
        sys.stdin.read()  # until the test closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(main())
