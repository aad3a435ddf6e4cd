"""The kernels' internal API: what lowprec's own modules share, not a public interface.

One job per file (docs/design/DESIGN.md, "Layout"), in layer order:

- `checks`: one check per kind of option.
- `heap`: the C heap's top pad, so that freed work arrays stay mapped.
- `cache`: small thread-safe caches of tables derived from a format.
- `lazy`: where entry points hand Dask arrays to `lowprec.daskarrays`.
- `scratch`: per-thread work buffers that small calls reuse.
- `fpstate`: NumPy's error state, set cheaply for small calls.
- `float64`: float64 bit-pattern constants.
- `eft`: error-free transforms.
- `inputs`: reading real input.
- `parallel`: chunks, threads and spans.
- `progress`: the optional progress bar of long calls.
- `stream`: the counter-based random words of "sr".
- `plan`: the one validation of a rounding's options.
- `kernel`: the one rounding kernel.
- `unsigned`: rounding into the unsigned scale formats.

The names carry no underscore because other lowprec modules import them. Users import
the public names from `lowprec` instead.
"""
