"""Collection beyond one process: collectors whose workers are Ray actors.

Examples:
    >>> from cadence.collectors.distributed import RayCollector
    >>> RayCollector.__name__
    'RayCollector'
"""

from cadence.collectors.distributed.ray_collector import RayCollector

__all__ = ["RayCollector"]
