"""Helpers the rule families share: versions compared, torch present, a variable set by activation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.audit.inventory import Inventory

if TYPE_CHECKING:
    import rattler


def version_of(text: str) -> rattler.Version | None:
    import rattler  # loaded when a rule compares versions, not by every audit (conda's hooks)

    try:
        return rattler.Version(text.split("+", 1)[0])
    except Exception:
        return None


def at_least(text: str, floor: str) -> bool:
    v = version_of(text)
    f = version_of(floor)
    return v is not None and f is not None and v >= f


def has_torch(inv: Inventory) -> bool:
    return "pytorch" in inv.packages or "torch" in inv.pip


def set_by_activation(inv: Inventory, name: str) -> list[str]:
    var = inv.activation.get(name)
    if var is not None and var.value is not None:
        return [f"{name}={var.value} set by {var.source}"]
    return []


def openmp_apis(inv: Inventory) -> set[str]:
    """The OpenMP runtimes the env's processes can load: libraries on disk, else what the packages
    and torch's build bring."""
    apis = {lib.api for lib in inv.libs if lib.api in ("libgomp", "libomp", "libiomp5")}
    if not apis:
        if "llvm-openmp" in inv.packages:
            apis.add("libomp")
        if "intel-openmp" in inv.packages:
            apis.add("libiomp5")
        if "libgomp" in inv.packages:
            apis.add("libgomp")
    if inv.torch_source() in ("pip", "pytorch-channel"):
        apis.add("libgomp")
    return apis
