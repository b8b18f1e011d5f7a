"""Sharing an env: lock files, exports, sync."""
