import os

from hypothesis import HealthCheck, settings

# Deterministic in CI; no deadline (2 shared cores make timings meaningless).
settings.register_profile("default", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))
