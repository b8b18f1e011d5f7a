"""Child (one rank, started by torch.distributed.run with -m, or by srun in a Slurm job): torch
first, as DDP workers do, then the MKL side named on the command line, then a gloo all_reduce. The
rank's report is one write: the ranks share the launcher's pipe. Under srun the rank comes from
Slurm's variables, as Lightning and submitit read them; the launcher sets MASTER_ADDR/PORT."""

import os
import sys

if "RANK" not in os.environ and "SLURM_PROCID" in os.environ:
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ.get("SLURM_NTASKS", "1")
    os.environ["LOCAL_RANK"] = os.environ.get("SLURM_LOCALID", "0")

import torch  # torch first of the heavy imports: the seed scenario's order
import torch.distributed as dist

for _extra in sys.argv[1:]:
    __import__(_extra)
dist.init_process_group("gloo")
_t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(_t)
_world = dist.get_world_size()
_expected = _world * (_world + 1) / 2
assert float(_t[0]) == _expected, (float(_t[0]), _expected)
dist.destroy_process_group()
_threads = f"threads={torch.get_num_threads()} OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
sys.stdout.write("rank {} ok {} {}\n".format(os.environ.get("RANK"), float(_t[0]), _threads))
sys.stdout.flush()
