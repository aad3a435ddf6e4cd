"""lowprec.engine.heap: freed work arrays stay mapped, as page-fault counts show."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from lowprec.engine import heap

GLIBC = sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None

CHURN = textwrap.dedent("""
    import resource
    import numpy as np
    import lowprec  # noqa: F401
    def churn():
        for _ in range(20):
            xs = [np.ones(1 << 18) for _ in range(4)]     # four 2 MiB arrays at once
            del xs
    churn()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
""")


def _faults(**env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", CHURN], env={**clean, **env},
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not GLIBC, reason="M_TOP_PAD and M_MMAP_THRESHOLD are glibc's")
def test_importing_lowprec_keeps_freed_arrays_mapped():
    # 80 rounds of 2 MiB arrays: each round faults its 2,048 pages in again unless the
    # heap keeps them.
    assert _faults(LOWPREC_TOP_PAD="0") > 10_000
    assert _faults() < 1_000


def test_the_environment_decides():
    assert heap.keep_freed({"LOWPREC_TOP_PAD": "0"}) == 0
    assert heap.keep_freed({"MALLOC_TOP_PAD_": "4096"}) == 0       # the user's own
    assert heap.keep_freed({"MALLOC_MMAP_THRESHOLD_": "4096"}) == 0
    with pytest.raises(ValueError, match="LOWPREC_TOP_PAD must be a number of bytes"):
        heap.keep_freed({"LOWPREC_TOP_PAD": "lots"})
    if GLIBC:
        assert heap.keep_freed({}) == heap.TOP_PAD
