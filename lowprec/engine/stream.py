"""Counter-based random words for stochastic rounding.

The word of element ``p`` is a function of (seed, p) alone. So "sr" gives the same
result for any chunk size, thread count, span or split of an array. A prefix rounds
as the same prefix of a longer array.

The construction is in docs/design/DESIGN.md, "Rounding". The key K(seed) is
``SeedSequence(seed).generate_state(2, uint64)`` read as one 128-bit integer. The
word of position ``p`` is word ``p % 4`` of NumPy's Philox-4x64-10 block
``p // 4`` under K: ``Philox(key=K, counter=p // 4).random_raw(4)[p % 4]``.
Philox (Salmon et al., SC'11) is a counter-based generator: any block is computed
from its counter without the blocks before it. This module draws. It never rounds.
"""

from __future__ import annotations

import threading

import numpy as np

from .checks import check_int, check_rng

__all__ = ["Stream", "At", "restrict", "as_stream", "uniform_from_words"]

_SEED_BOUND = 2 ** 63


class Stream:
    """The words of one seed, from position ``base`` on: ``words(pos, n)`` are the
    words of positions ``base + pos`` ... ``base + pos + n - 1``.

    Examples
    --------
    >>> s = Stream(7)
    >>> bool((s.words(0, 10)[3:] == s.words(3, 7)).all())
    True
    >>> bool((Stream(7, base=5).words(0, 2) == s.words(5, 2)).all())
    True
    """

    __slots__ = ("seed", "key", "base")

    def __init__(self, seed: int, base: int = 0) -> None:
        self.seed = seed
        self.base = base
        key = _KEYS.get(seed)
        if key is None:
            state = np.random.SeedSequence(seed).generate_state(2, np.uint64)
            key = int(state[0]) | (int(state[1]) << 64)
            if len(_KEYS) >= 256:
                _KEYS.clear()
            _KEYS[seed] = key
        self.key: int = key

    def at(self, offset: int) -> Stream:
        """The same seed, ``offset`` positions further on."""
        twin = object.__new__(Stream)
        twin.seed, twin.key, twin.base = self.seed, self.key, self.base + offset
        return twin

    def derived(self, k: int) -> Stream:
        """An independent stream for the ``k``-th operation of a composed computation
        (the seed ``SeedSequence((seed, k))``), at the same ``base``."""
        return Stream(_derive(self.seed, k), self.base)

    def words(self, pos: int, n: int) -> np.ndarray:
        """The words of positions ``base + pos`` ... ``base + pos + n - 1`` (uint64)."""
        p = self.base + pos
        bg = _philox(self.key, p >> 2)
        if p & 3:
            bg.random_raw(p & 3)     # the block's words before position p
        return bg.random_raw(n)


# seed -> key: SeedSequence costs microseconds a call, and calls repeat their seeds.
_KEYS: dict[int, int] = {}
_LOCAL = threading.local()
_MASK64 = (1 << 64) - 1


def _philox(key: int, block: int) -> np.random.Philox:
    """This thread's Philox generator set to ``key`` at counter ``block``: the state
    `Philox(key=key, counter=block)` has (buffer empty), at a fraction of its cost."""
    bg = getattr(_LOCAL, "bg", None)
    if bg is None:
        bg = _LOCAL.bg = np.random.Philox(key=0)
        _LOCAL.state = bg.state
    state = _LOCAL.state
    inner = state["state"]
    inner["counter"] = np.array([block & _MASK64, (block >> 64) & _MASK64, 0, 0], np.uint64)
    inner["key"] = np.array([key & _MASK64, key >> 64], np.uint64)
    state["buffer_pos"] = 4
    bg.state = state
    return bg


class At:
    """The words of some positions of ``stream``: word ``j`` is that of position
    ``idx[j]`` (sorted, relative to the stream's base). How a step that works on a
    subset of a chunk's elements draws each element's own word (`restrict`)."""

    __slots__ = ("stream", "idx")

    def __init__(self, stream: Stream, idx: np.ndarray) -> None:
        self.stream, self.idx = stream, idx

    def words(self, pos: int, n: int) -> np.ndarray:
        sel = self.idx[pos:pos + n]
        if sel.size == 0:
            return np.empty(0, np.uint64)
        first = int(sel[0])
        return self.stream.words(first, int(sel[-1]) - first + 1)[sel - first]

    def derived(self, k: int) -> At:
        return At(self.stream.derived(k), self.idx)


def restrict(stream: Stream | At, sel: np.ndarray) -> At:
    """The words of the elements ``sel`` (a boolean mask or sorted indices) of what
    ``stream`` draws for, each at its own position.

    Examples
    --------
    >>> s = Stream(4)
    >>> bool((restrict(s, np.array([1, 5])).words(0, 2) == s.words(0, 6)[[1, 5]]).all())
    True
    """
    sel = np.asarray(sel)
    idx = np.flatnonzero(sel) if sel.dtype == bool else sel.astype(np.intp)
    if isinstance(stream, At):
        return At(stream.stream, stream.idx[idx])
    return At(stream, idx)


def _derive(seed: int, k: int) -> int:
    return int(np.random.SeedSequence((seed, k)).generate_state(1, np.uint64)[0] >> 1)


def as_stream(rng: object, offset: object = 0, name: str = "rng") -> Stream:
    """The stream of an ``rng`` option.

    * An int seed is used as it is.
    * A Generator gives one draw, ``integers(0, 2**63)``, used as the seed. It
      advances by that draw, once per call.
    * None gives a seed from fresh OS entropy.

    ``offset`` moves the call's element 0 to that position. So a slice of a larger
    array rounds as that array does.

    Examples
    --------
    >>> g = np.random.default_rng(3)
    >>> bool(as_stream(g).seed == np.random.default_rng(3).integers(0, 2**63))
    True
    >>> as_stream(5, offset=2).base
    2
    """
    check_rng(rng, name)
    offset = check_int("offset", offset, minimum=0)
    if isinstance(rng, np.random.Generator):
        seed = int(rng.integers(0, _SEED_BOUND))
    elif rng is None:
        seed = int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> 1)
    else:
        seed = int(rng)   # type: ignore[call-overload]  # check_rng: an int
    return Stream(seed, offset)


def uniform_from_words(words: np.ndarray, sr_bits: int | None, out: np.ndarray) -> np.ndarray:
    """``w`` of the rounding kernel from 64-bit words.

    The top ``r`` bits (``r`` = ``sr_bits``, default 53) give ``k / 2**r``, plus
    ``2**-r``. So w is uniform on {1, ..., 2**r} / 2**r, exact in float64.
    ``(word >> 11) * 2**-53`` is NumPy's own double."""
    r = 53 if sr_bits is None else sr_bits
    np.right_shift(words, np.uint64(64 - r), out=words)     # the caller's own words
    np.multiply(words, 2.0 ** -r, out=out)     # exact: k < 2**53
    out += 2.0 ** -r                            # w, exact
    return out
