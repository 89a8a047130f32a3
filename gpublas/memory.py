"""Pool statistics and control for the active backend."""
from . import backends
from .pool import get_pool


def memory_stats():
    """{'bytes_in_use', 'bytes_held', 'bytes_cached', 'device_allocations', 'allocations'}."""
    return get_pool(backends.current()).stats()


def free_cached():
    """Returns the pool's cached blocks to the device (arrays in use are untouched)."""
    get_pool(backends.current()).free_cached()
