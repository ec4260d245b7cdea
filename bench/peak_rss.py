"""A benchmark run's peak memory (standard library only: the Quix scripts import it too)."""

from __future__ import annotations

import resource

__all__ = ["peak_rss_kib"]


def peak_rss_kib() -> int:
    """This process's peak RSS in KiB: ``VmHWM`` of /proc/self/status. Not ``ru_maxrss``,
    which keeps the high-water mark across exec: a run started by a parent holding 400 MB
    reported 400 MB. Where /proc has none (not Linux), ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
