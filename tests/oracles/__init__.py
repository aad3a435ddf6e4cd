"""Reference implementations the tests compare lowprec against, one file per subject.

Each is written from a definition (IEEE 754, TENSORCORE.md, a format's bit layout) on
Fractions or Python integers, and shares no code with the function it checks beyond
`lowprec.testing.reference_round`, the Fraction rounding. Test modules import them as
``from oracles.ieee_fraction import exact_result`` (tests/conftest.py puts the tests
directory on ``sys.path``).
"""
