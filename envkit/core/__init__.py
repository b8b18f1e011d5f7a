"""Primitives every layer uses: errors, atomic files, paths, names, values that reach other programs."""
