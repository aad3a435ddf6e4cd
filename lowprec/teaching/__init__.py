"""Teaching: one value explained bit by bit, the demo's experiment, the `lowprec` command.

`explain` and `Explanation` (re-exported as `lp.explain`, `lp.Explanation`) and
`layout`, `explain_text` live in `explanation`; the error-against-K experiment in
`experiments`; the command line in `cli` (docs/design/DESIGN.md, "Layout").
"""

from .experiments import error_table, error_vs_k, plot_error_vs_k
from .explanation import MODE_NAMES, Explanation, explain, explain_text, layout

__all__ = ["Explanation", "explain", "explain_text", "layout", "MODE_NAMES",
           "error_vs_k", "error_table", "plot_error_vs_k"]
