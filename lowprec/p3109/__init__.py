"""IEEE P3109 (Interim Report v4.0): its formats, projection and conformance.

`format` builds Binary{K, P, Σ, Δ} as a `lowprec.Format`, which every lowprec
function accepts. `project` is the report's ωProject on float64 input, returning
code points. The operations take and return code points, with the report's formats
and projection specification as arguments. `conformance` lists what lowprec provides
of §4.5, and `declarations` writes the four YAML files of §4.6.
"""

from .arithmetic import absolute, add, divide, faa, fma, multiply, negate, sqrt, subtract
from .blocks import (
    block_abs,
    block_add,
    block_clamp,
    block_convert,
    block_divide,
    block_dot_product,
    block_faa,
    block_fma,
    block_maximum,
    block_maximum_finite,
    block_maximum_magnitude,
    block_maximum_magnitude_number,
    block_maximum_number,
    block_minimum,
    block_minimum_finite,
    block_minimum_magnitude,
    block_minimum_magnitude_number,
    block_minimum_number,
    block_multiply,
    block_negate,
    block_reduce_add,
    block_reduce_multiply,
    block_sqrt,
    block_subtract,
    convert_from_block,
    convert_to_block,
    convert_to_block_max_abs_finite,
    from_e8m0,
    scaled_add,
    scaled_multiply,
    scaled_subtract,
    to_e8m0,
)
from .claims import F4, F8, FS, FX, REPORT_VERSION, Requirement, conformance, declarations
from .classification import (
    CLASSES,
    classify,
    compare_equal,
    compare_greater,
    compare_greater_equal,
    compare_less,
    compare_less_equal,
    is_finite,
    is_infinite,
    is_nan,
    is_normal,
    is_one,
    is_sign_minus,
    is_subnormal,
    is_zero,
    next_greater_than,
    next_less_than,
    total_order,
)
from .extrema import (
    clamp,
    maximum,
    maximum_finite,
    maximum_magnitude,
    maximum_magnitude_number,
    maximum_number,
    minimum,
    minimum_finite,
    minimum_magnitude,
    minimum_magnitude_number,
    minimum_number,
)
from .formats import DOMAINS, format, is_p3109, parameters  # noqa: A004 - the report's name
from .projection import ROUNDINGS, SATURATIONS, STOCHASTIC, project, special_codes

__all__ = ["format", "DOMAINS", "parameters", "is_p3109", "project", "special_codes",
           "ROUNDINGS", "SATURATIONS", "STOCHASTIC", "conformance", "declarations",
           "Requirement", "REPORT_VERSION", "F8", "F4", "FX", "FS",
           "negate", "absolute", "add", "subtract", "multiply", "divide", "fma", "faa",
           "sqrt", "compare_less", "compare_less_equal", "compare_equal", "compare_greater",
           "compare_greater_equal", "total_order", "is_zero", "is_one", "is_nan",
           "is_infinite", "is_finite", "is_sign_minus", "is_normal", "is_subnormal",
           "classify", "CLASSES", "next_greater_than", "next_less_than",
           "minimum", "maximum", "minimum_number", "maximum_number", "minimum_magnitude",
           "maximum_magnitude", "minimum_magnitude_number", "maximum_magnitude_number",
           "minimum_finite", "maximum_finite", "clamp",
           "convert_from_block", "convert_to_block", "convert_to_block_max_abs_finite",
           "block_reduce_add", "block_reduce_multiply", "block_dot_product",
           "block_convert", "block_negate", "block_abs", "block_sqrt", "block_add",
           "block_subtract", "block_multiply", "block_divide", "block_fma",
           "block_faa", "block_minimum", "block_maximum", "block_minimum_number",
           "block_maximum_number", "block_minimum_magnitude",
           "block_maximum_magnitude", "block_minimum_magnitude_number",
           "block_maximum_magnitude_number", "block_minimum_finite",
           "block_maximum_finite", "block_clamp", "scaled_add", "scaled_subtract",
           "scaled_multiply", "from_e8m0", "to_e8m0"]
