"""The post-install probe: a stdlib-only script run by the env's own python, parsed into typed results."""
