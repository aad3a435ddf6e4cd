"""IEEE P3109's formats Binary{K, P, Σ, Δ} as `lowprec.Format` objects.

The Interim Report v4.0 (§3.1, §4.7.2) defines each format by its bitwidth K,
precision P, signedness and domain. This module maps those four parameters to a
`Format` and back; it never rounds and holds no state beyond a cache of formats.
"""

from __future__ import annotations

from ..engine.checks import check_bool, check_choice, check_int
from ..formats import Format, FormatLike, p3109_format
from ..formats import format as _format

__all__ = ["format", "DOMAINS", "parameters", "is_p3109"]

#: The report's domains: "finite" (no inf) and "extended" (±inf at the top codes).
DOMAINS = ("extended", "finite")


def format(k: int, p: int, signed: bool = True,  # noqa: A001 - the report's name
           domain: str = "extended") -> Format:
    """The P3109 format Binary{k, p, signed, domain}, named as the report names it.

    Signed formats need ``0 < p < k``, unsigned ones ``0 < p <= k``, and ``k > 2``.
    Formats whose values float64 cannot hold (``k - p > 10`` signed, ``> 9``
    unsigned) raise ValueError.

    Examples
    --------
    >>> import lowprec as lp
    >>> f = lp.p3109.format(8, 3)
    >>> f.name, f.max, f.has_inf, lp.format("binary8p3se") == f
    ('binary8p3se', 49152.0, True, True)
    >>> lp.p3109.format(8, 1, signed=False, domain="finite").name
    'binary8p1uf'
    """
    k = check_int("k", k, minimum=3)
    p = check_int("p", p, minimum=1)
    signed = check_bool("signed", signed)
    domain = check_choice("domain", domain, DOMAINS)
    return p3109_format(k, p, signed, domain == "extended")


def is_p3109(fmt: Format) -> bool:
    """Whether ``fmt`` has the parameters of a P3109 format (whatever its name).

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.is_p3109(lp.FP8_E4M3FNUZ), lp.p3109.is_p3109(lp.FP8_E4M3)
    (True, False)
    """
    if fmt.kind not in ("fnuz", "fn", "extended") or not fmt.zero or not fmt.subnormals:
        return False
    if (fmt.kind == "fnuz" and not fmt.signed) or (fmt.kind == "fn" and fmt.signed):
        return False
    k = fmt.bits
    p = fmt.mantissa_bits + 1
    try:
        return p3109_format(k, p, fmt.signed, fmt.kind == "extended") == fmt
    except ValueError:
        return False


def parameters(fmt: FormatLike) -> tuple[int, int, bool, str]:
    """``(K, P, signed, domain)`` of a P3109 format; ValueError for any other format.

    Examples
    --------
    >>> import lowprec as lp
    >>> lp.p3109.parameters("binary8p4sf")
    (8, 4, True, 'finite')
    """
    f = _format(fmt)
    if not is_p3109(f):
        raise ValueError(f"{f} is not a P3109 format: build one with "
                         "lowprec.p3109.format(k, p, signed, domain)")
    return f.bits, f.p, f.signed, "extended" if f.kind == "extended" else "finite"
