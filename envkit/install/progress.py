"""Rich progress for installs, fed by rattler's InstallerReporter callbacks (TTY only)."""

from __future__ import annotations

import threading

import rattler
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn


class RichInstallReporter(rattler.InstallerReporter):
    """Callbacks arrive from rattler's worker threads and interleave; a lock keeps counts right."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console, transient=True)
        self._cache = self._progress.add_task("extract", total=None)
        self._link = self._progress.add_task("link", total=None)
        self._next = 0

    def _id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    def on_transaction_start(self, total_operations: int) -> None:
        self._progress.start()
        self._progress.update(self._cache, total=total_operations)
        self._progress.update(self._link, total=total_operations)

    def on_populate_cache_start(self, operation: int, package_name: str) -> int:
        self._progress.update(self._cache, description=f"extract {package_name}")
        return self._id()

    def on_populate_cache_complete(self, cache_entry: int) -> None:
        self._progress.advance(self._cache)

    def on_link_start(self, operation: int, package_name: str) -> int:
        self._progress.update(self._link, description=f"link {package_name}")
        return self._id()

    def on_link_complete(self, index: int) -> None:
        self._progress.advance(self._link)

    def on_transaction_complete(self) -> None:
        self._progress.stop()

    # Events this display does not show (downloads do not fire for file:// channels).
    def on_download_start(self, cache_entry: int) -> int:
        return self._id()

    def on_download_progress(self, download_idx: int, progress: int, total: int | None) -> None:
        return None

    def on_download_completed(self, download_idx: int) -> None:
        return None

    def on_validate_start(self, cache_entry: int) -> int:
        return self._id()

    def on_validate_complete(self, validate_idx: int) -> None:
        return None

    def on_transaction_operation_start(self, operation: int) -> None:
        return None

    def on_transaction_operation_complete(self, operation: int) -> None:
        return None

    def on_unlink_start(self, operation: int, package_name: str) -> int:
        return self._id()

    def on_unlink_complete(self, index: int) -> None:
        return None

    def on_pre_unlink_start(self, package_name: str, script_path: str) -> int:
        return self._id()

    def on_pre_unlink_complete(self, index: int, success: bool) -> None:
        return None

    def on_post_link_start(self, package_name: str, script_path: str) -> int:
        return self._id()

    def on_post_link_complete(self, index: int, success: bool) -> None:
        return None
