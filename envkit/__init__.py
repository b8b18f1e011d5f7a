"""envkit: conda environments whose numeric toolchain is consistent, proven by a probe."""

__version__ = "0.1.0"
