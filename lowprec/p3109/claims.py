"""What lowprec implements of IEEE P3109 v4.0: `conformance` and the YAML declarations.

§4.5 of the Interim Report lists the operation specializations a conforming
implementation provides; `conformance` says, requirement by requirement, which of them
lowprec provides and through which function. §4.6 and the report's Exemplars ask an
implementation to ship four YAML files (Configurations, Profiles, Constraints,
Kappas); `declarations` writes them from the same table. Nothing here computes.
"""

from __future__ import annotations

from typing import NamedTuple

from .projection import ROUNDINGS, SATURATIONS, STOCHASTIC

__all__ = ["Requirement", "conformance", "declarations", "REPORT_VERSION", "F8", "F4",
           "FX", "FS"]

#: The report this package follows.
REPORT_VERSION = "IEEE P3109 Interim Report v4.0 (26 Jun 2026)"
#: §4.5's format sets: F8, F4, the external formats FX and the scale formats Fs.
F8 = ("binary8p4se", "binary8p3se")
F4 = ("binary4p2sf",)
FX = ("binary32", "binary16", "bfloat16")
FS = ("binary8p1uf",)


class Requirement(NamedTuple):
    """One line of §4.5: the operation, its formats, and lowprec's status."""

    operation: str
    formats: str
    provided: bool
    by: str


_NOT_YET = "not provided yet"
_REQUIREMENTS = (
    Requirement("formats F8, F4", "Binary8p4se, Binary8p3se, Binary4p2sf", True,
                "lowprec.p3109.format, lp.format('binary8p3se'), lp.encode / lp.decode"),
    Requirement("formats FX", "binary32, binary16, bfloat16 (external)", True,
                "lp.FP32, lp.FP16, lp.BF16"),
    Requirement("projection specifications rho", "every rounding and saturation", True,
                "lowprec.p3109.project (ωProject)"),
    Requirement("Convert<f, fr, rho>", "f in F4 | F8 | FX, fr in F4 | F8", True,
                "lowprec.p3109.project(lp.decode(x, f), fr, ...)"),
    Requirement("Convert<f, fr, rho>", "fr in FX", False, _NOT_YET),
    Requirement("Negate, Abs<f, f, rho>", "F4 | F8", True,
                "lowprec.p3109.negate, lowprec.p3109.absolute"),
    Requirement("CopySign<fx, fy, fr, rho> (§4.10.2)", "F4 | F8", True,
                "lowprec.p3109.copysign"),
    Requirement("Recip<f, fr, rho>", "f, fr in F4 | F8", True,
                "lowprec.p3109.recip (also rsqrt)"),
    Requirement("Recip<f, fr, rho>", "f or fr in FX", False, _NOT_YET),
    Requirement("Add, Subtract, Multiply<f1, f2, fr, rho>", "F4 | F8 -> F8", True,
                "lowprec.p3109.add, subtract, multiply (also divide, fma, sqrt)"),
    Requirement("Add, Subtract, Multiply<f1, f2, fr, rho>", "F4 | F8 -> FX", False,
                _NOT_YET),
    Requirement("FMA<f1, f2, fr, fr, rho>", "F4 | F8 -> FX", False,
                "lowprec.p3109.fma into P3109 formats only"),
    Requirement("FAA<f1, f2, fr, fr, rho>", "F4 | F8 -> FX", False,
                "lowprec.p3109.faa into P3109 formats only"),
    Requirement("Exp ... ArcTan2Pi<f, fr, rho> (§4.10.9-§4.10.16)", "F4 | F8 -> F4 | F8",
                True, "lowprec.p3109.exp, exp2, expm1, log, log2, log1p, softplus, sin ... "
                "arctanh, sinpi ... arctanpi, hypot, arctan2, arctan2pi"),
    Requirement("Minimum ... MaximumFinite<f, f, f, rho>", "F4 | F8", True,
                "lowprec.p3109.minimum ... maximum_finite"),
    Requirement("CompareLess ... CompareGreaterEqual<f, f>", "F4 | F8", True,
                "lowprec.p3109.compare_less ... compare_greater_equal, total_order"),
    Requirement("IsZero ... IsSubnormal, NextGreaterThan, NextLessThan", "F4 | F8", True,
                "lowprec.p3109.is_zero ... is_subnormal, classify, next_greater_than, "
                "next_less_than"),
    Requirement("BitwidthOf ... MinNormalOf", "F4 | F8 | FX", True,
                "lp.Format attributes (bits, p, signed, kind, bias, max, min, "
                "smallest_subnormal, smallest_normal)"),
    Requirement("ScaledAdd, ScaledSubtract, ScaledMultiply", "Fs = Binary8p1uf", True,
                "lowprec.p3109.scaled_add, scaled_subtract, scaled_multiply"),
    Requirement("ConvertToBlock, ConvertToBlockMaxAbsFinite, ConvertFromBlock (§5.2)",
                "any B, fs, fx; fr a P3109 format", True,
                "lowprec.p3109.convert_to_block, convert_to_block_max_abs_finite, "
                "convert_from_block"),
    Requirement("BlockReduceAdd, BlockReduceMultiply, BlockDotProduct (§5.3)",
                "any B, fs, fx; fr a P3109 format", True,
                "lowprec.p3109.block_reduce_add, block_reduce_multiply, block_dot_product"),
    Requirement("Block<Op> (§5.4) for Convert ... Clamp, Recip, RSqrt, CopySign", "fr a "
                "P3109 format; rounding ops need a power-of-two result scale", True,
                "lowprec.p3109.block_add ... block_clamp, block_recip, block_rsqrt, "
                "block_copysign"),
    Requirement("Block<Op> (§5.4) for Exp ... ArcTan2Pi", "fr a P3109 format; a "
                "power-of-two result scale", True,
                "lowprec.p3109.block_exp, block_exp2, block_expm1, block_log ... "
                "block_softplus, block_sin ... block_arctanpi, block_hypot, "
                "block_arctan2, block_arctan2pi"),
)


def conformance() -> tuple[Requirement, ...]:
    """§4.5's requirements, each with whether lowprec provides it and how.

    Examples
    --------
    >>> import lowprec as lp
    >>> rows = lp.p3109.conformance()
    >>> rows[0].operation, rows[0].provided
    ('formats F8, F4', True)
    """
    return _REQUIREMENTS


def _metadata(name: str) -> str:
    from .. import __version__
    return (f"---\nMetadata:\n  conformance: \"IEEE SA P3109\"\n  version: \"4.0.0\"\n"
            f"  provider: \"lowprec\"\n  contact:\n    uri: lowprec/README.md\n"
            f"  implementation:\n    name: \"lowprec\"\n    version: \"{__version__}\"\n"
            f"  {name}:\n    uri: lowprec/p3109/claims.py\n")


def declarations() -> dict[str, str]:
    """The four YAML files §4.6 asks for, as texts keyed by file name.

    lowprec has one configuration, ``Reference``: every rounding (Stochastic ones
    with 1 to 52 random bits) and every saturation, on every P3109 format float64
    holds. It approximates nothing, so Kappas.yaml and Constraints.yaml are empty.

    Examples
    --------
    >>> import lowprec as lp
    >>> sorted(lp.p3109.declarations())
    ['Configurations.yaml', 'Constraints.yaml', 'Kappas.yaml', 'Profiles.yaml']
    """
    rounding = "\n".join(
        f"      - {r}:\n          - bits: (' 1:52 ')" if r in STOCHASTIC else f"      - {r}"
        for r in ROUNDINGS)
    saturation = "\n".join(f"      - {s}" for s in SATURATIONS)
    configurations = (_metadata("Configurations")
                      + "# reset context\nReference:\n  IEEE754:\n"
                      + "".join(f"    - {f}\n" for f in ("binary32", "binary16", "BFloat16"))
                      + "  Projections:\n    Rounding:\n" + rounding
                      + "\n    Saturation:\n" + saturation + "\n  KappaApproximate: []\n")
    profiles = (_metadata("Profiles") + "# reset context\nReference:\n  formats:\n"
                "    - Binary8p3se\n    - Binary8p4se\n    - Binary4p2sf\n    - Binary8p1uf\n"
                "    - (' \"Binary$(k)p$(p)s$(d)\" for k in 3:16, p in 1:k-1, d in [e, f]"
                " if k - p <= 10 ')\n"
                "    - (' \"Binary$(k)p$(p)u$(d)\" for k in 3:16, p in 1:k, d in [e, f]"
                " if k - p <= 9 ')\n")
    return {"Configurations.yaml": configurations, "Profiles.yaml": profiles,
            "Constraints.yaml": _metadata("Constraints") + "Empty: true\n",
            "Kappas.yaml": _metadata("Kappas") + "Empty: true\n"}
