#!/usr/bin/env python
"""gloo all_reduce smoke test for PyTorch replicas.

Uses MASTER_ADDR / MASTER_PORT / WORLD_SIZE / RANK (init_method="env://").
Each rank contributes tensor([rank + 1.]); after all_reduce(SUM) every rank
must hold W*(W+1)/2.  Prints "rank=R world_size=W sum=S ok" and exits 0,
or prints an error and exits 1.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def main():
    for name in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        if name not in os.environ:
            print(f"error: {name} is not set", file=sys.stderr, flush=True)
            return 1
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    print(f"rank={rank} world_size={world_size} connecting to "
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)

    dist.init_process_group("gloo", init_method="env://",
                            timeout=datetime.timedelta(seconds=120))
    assert dist.get_rank() == rank and dist.get_world_size() == world_size

    t = torch.tensor([rank + 1.0])
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    got = t.item()
    want = world_size * (world_size + 1) / 2
    dist.barrier()
    dist.destroy_process_group()

    if got != want:
        print(f"rank={rank} world_size={world_size} sum={got:g} WRONG "
              f"(expected {want:g})", file=sys.stderr, flush=True)
        return 1
    print(f"rank={rank} world_size={world_size} sum={got:g} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
