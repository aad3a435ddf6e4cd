"""The tests directory on ``sys.path`` (the suite runs with ``--import-mode=importlib``,
which adds nothing), so that test modules import their shared code as ``helpers``,
``peers``, ``tensor_inputs`` and ``oracles.*``; and the Hypothesis profiles."""

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Two profiles, chosen by HYPOTHESIS_PROFILE; "ci" unless it says "dev", so the README's
# test command gives every user the same examples. Neither has a deadline (2 shared
# cores make timings meaningless).
#   ci:  derandomized, the same examples on every run (CI and the README's command)
#   dev: random examples on every run, failures replayed from .hypothesis/ (exploring)
_COMMON = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", derandomize=True, **_COMMON)
settings.register_profile("dev", **_COMMON)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
