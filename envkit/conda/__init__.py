"""envkit inside conda: the plugin and what its hooks do."""
