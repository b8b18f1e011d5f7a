"""What an env holds and how conda sees it: registry, conda-meta, history, the record, kernels, protection."""
