"""The first number ``numpy.random.default_rng(seed).random()`` draws, without numpy.

A drive's starting platter angle comes from its seed (`blksim.disk_models.drive`).
It used to be drawn with numpy, and every published figure depends on it; computing
the same double in pure Python keeps those figures while letting a run that needs
nothing else from numpy (``blksim validate``) skip the import, which costs more CPU
than the whole 10,000-request replay.

The steps are numpy's documented seeding (numpy 1.17+, unchanged through 2.x):
`SeedSequence` hashes the integer's 32-bit words into a pool of four words
(O'Neill's seed_seq_fe design, ``numpy/random/bit_generator.pyx``) and expands the
pool into four 64-bit words; PCG64 takes the first two as its initial state and the
last two as its stream (``pcg_setseq_128_srandom_r``, M. E. O'Neill, "PCG: A Family
of Simple Fast Space-Efficient Statistically Good Algorithms for Random Number
Generation", 2014); the XSL-RR output of its first step gives 64 bits, whose top 53
make the double in [0, 1).
"""

from __future__ import annotations

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_M128 = (1 << 128) - 1

_POOL_SIZE = 4
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R = 0xCA01F9DD, 0x4973F715
_XSHIFT = 16

_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341


def _words32(value: int) -> list:
    """A non-negative integer as 32-bit words, least significant first ([0] for 0)."""
    words = []
    while True:
        words.append(value & _M32)
        value >>= 32
        if not value:
            return words


class _Hasher:
    """The multiplicative hash SeedSequence applies to each word, with its running constant."""

    __slots__ = ("const", "mult")

    def __init__(self, init: int, mult: int) -> None:
        self.const, self.mult = init, mult

    def __call__(self, value: int) -> int:
        value ^= self.const
        self.const = (self.const * self.mult) & _M32
        value = (value * self.const) & _M32
        return value ^ (value >> _XSHIFT)


def _mix(x: int, y: int) -> int:
    result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _M32
    return result ^ (result >> _XSHIFT)


def _seed_pool(entropy: list) -> list:
    hashmix = _Hasher(_INIT_A, _MULT_A)
    pool = [hashmix(entropy[i] if i < len(entropy) else 0) for i in range(_POOL_SIZE)]
    for src in range(_POOL_SIZE):
        for dst in range(_POOL_SIZE):
            if src != dst:
                pool[dst] = _mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL_SIZE, len(entropy)):
        for dst in range(_POOL_SIZE):
            pool[dst] = _mix(pool[dst], hashmix(entropy[src]))
    return pool


def _state64(pool: list, n_words: int) -> list:
    hashmix = _Hasher(_INIT_B, _MULT_B)
    words32 = [hashmix(pool[i % _POOL_SIZE]) for i in range(2 * n_words)]
    return [words32[2 * k] | (words32[2 * k + 1] << 32) for k in range(n_words)]


def first_random(seed: int) -> float:
    """``numpy.random.default_rng(seed).random()`` for a non-negative integer ``seed``."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
    s0, s1, i0, i1 = _state64(_seed_pool(_words32(seed)), 4)
    init_state, init_seq = (s0 << 64) | s1, (i0 << 64) | i1
    inc = ((init_seq << 1) | 1) & _M128
    state = inc                                            # one step from state 0
    state = (((state + init_state) & _M128) * _PCG_MULT + inc) & _M128
    state = (state * _PCG_MULT + inc) & _M128              # the draw's own step
    rot = state >> 122
    xored = ((state >> 64) ^ state) & _M64
    out = ((xored >> rot) | (xored << ((64 - rot) & 63))) & _M64
    return (out >> 11) * (1.0 / 9007199254740992.0)
