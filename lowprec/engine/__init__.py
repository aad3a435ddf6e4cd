"""The kernels' internal API: what lowprec's own modules share, not a public interface.

One job per file (docs/design/DESIGN.md, "Layout"), in layer order: `checks` (option
checks), `cache` (bounded caches), `scratch` (per-thread reused work buffers),
`float64` (bit-pattern constants), `eft` (error-free transforms), `inputs` (reading
real input), `parallel` (chunks, threads, spans), `plan` (the one validation of a
rounding's options), `kernel` (the one rounding kernel). The names carry no
underscore because other lowprec modules import them; users import the public names
from `lowprec` instead.
"""
