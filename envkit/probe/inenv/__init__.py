"""The probe that runs inside a target env, with the env's own python and nothing but the standard
library. envkit copies this package into the probe's scratch directory as `envkit_probe` and runs
`python -m envkit_probe`; every check that needs a fresh process is `python -m envkit_probe.<module>`.
Nothing else of envkit (nor rich, yaml, rattler) is on the path there.

Python floor: 3.9 (the legacy pytorch channel's oldest builds target it). ruff checks the package
against 3.9, the tests run it on PyPy 3.9.

    main.py       read the config, run every check, print one JSON report
    report.py     check records, evidence excerpts, the tagged lines children print
    proc.py       run the env's python with a timeout and background priority
    proctree.py   stop a process and everything below it (envkit's runner uses it too)
    imports.py    import:MOD and import-order:A,B
    ddp.py        ddp-seed and ddp-gloo, orchestrated from the probe
    parent.py     child: the MKL-first parent of the seed scenario
    seed_child.py child: torch first, then the MKL side; then observations or the DDP launcher
    ddp_worker.py child: one gloo rank (torchrun runs it with -m)
    observe.py    child: runtime observations in a process of their own
    inventory.py  loaded BLAS/OpenMP libraries (observed in a child) and the runtimes check
    numeric.py    numeric sanity (observed in a child) and its check
    gpu.py        driver, devices, NCCL (observed in a child) and its classification
    threads.py    thread settings in effect
    expect.py     the recipe's probe.expect
"""

PROBE_VERSION = 1
