"""ttgt.einsum_expression against numpy.einsum and opt_einsum.contract_expression: shapes,
constants, dtypes, out, alpha and beta, and the errors of wrong operands."""

from __future__ import annotations

import numpy as np
import pytest
import ttgt
from conftest import DTYPES, assert_close, need, random

NETWORKS = [
    ("ij,jk,kl->il", [(4, 5), (5, 6), (6, 3)]),
    ("pi,qj,pqrs,rk,sl->ijkl", [(6, 5), (6, 4), (6, 6, 6, 6), (6, 3), (6, 2)]),
    ("Pia,Pjb,iajb->", [(7, 3, 5), (7, 3, 5), (3, 5, 3, 5)]),
    ("abc,asd,bstw,ctf->dwf", [(6, 3, 6), (6, 2, 5), (3, 2, 2, 4), (6, 2, 5)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("...i,...i,i->...", [(2, 3), (1, 3), (3,)]),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("spec,shapes", NETWORKS)
def test_every_set_of_constants_gives_numpy(spec, shapes, dtype, rng):
    n = len(shapes)
    for mask in range(2**n - 1):  # every set of constants but all of them
        held = [k for k in range(n) if mask >> k & 1]
        consts = {k: random(rng, shapes[k], dtype) for k in held}
        args = [consts[k] if k in consts else shapes[k] for k in range(n)]
        e = ttgt.einsum_expression(spec, *args, constants=held, dtype=dtype)
        assert e.num_operands == n - len(held)
        for _ in range(2):  # new operands each time
            ops = {k: random(rng, shapes[k], dtype) for k in range(n) if k not in held}
            everything = [consts[k] if k in consts else ops[k] for k in range(n)]
            want = np.einsum(spec, *everything)
            got = e(*[ops[k] for k in sorted(ops)])
            assert got.dtype == np.dtype(dtype)
            assert got.shape == np.shape(want) == e.shape
            assert_close(got, want, dtype)


def test_out_alpha_beta_and_precomputed_steps(rng):
    c = random(rng, (8, 8), np.float64)
    e = ttgt.einsum_expression("pi,qj,pqrs,rk,sl->ijkl", c, c, (8, 8, 8, 8), c, c, constants=[0, 1, 3, 4])
    assert e.precomputed_steps == 0  # every step meets the integrals
    eri = random(rng, (8, 8, 8, 8), np.float64)
    want = np.einsum("pi,qj,pqrs,rk,sl->ijkl", c, c, eri, c, c)
    out = np.ones((8, 8, 8, 8))
    r = e(eri, out=out, alpha=2.0, beta=-1.0)
    assert r is out
    assert_close(out, 2.0 * want - 1.0, np.float64)
    chain = ttgt.einsum_expression("ij,jk,kl->il", (4, 5), c[:5, :6], c[:6, :3], constants=[1, 2])
    assert chain.precomputed_steps == 1
    x = random(rng, (4, 5), np.float64)
    assert_close(chain(x), x @ c[:5, :6] @ c[:6, :3], np.float64)
    assert "path for ij,jk,kl->il" in chain.explain()


def test_same_results_as_opt_einsum(rng):
    oe = need("opt_einsum")
    spec, shapes = NETWORKS[1]
    w = random(rng, shapes[2], np.float64)
    ours = ttgt.einsum_expression(spec, shapes[0], shapes[1], w, shapes[3], shapes[4], constants=[2])
    theirs = oe.contract_expression(spec, shapes[0], shapes[1], w, shapes[3], shapes[4], constants=[2])
    ops = [random(rng, s, np.float64) for k, s in enumerate(shapes) if k != 2]
    assert_close(ours(*ops), theirs(*ops), np.float64)


def test_wrong_operands_are_errors(rng):
    e = ttgt.einsum_expression("ij,jk,kl->il", (4, 5), (5, 6), (6, 3))
    a, b, c = np.ones((4, 5)), np.ones((5, 6)), np.ones((6, 3))
    with pytest.raises(ValueError, match="takes 3 operands"):
        e(a, b)
    with pytest.raises(ValueError, match="shape"):
        e(a, b, np.ones((6, 4)))
    with pytest.raises(ValueError, match="shape"):
        e(a, b, c, out=np.ones((4, 4)))
    with pytest.raises(ValueError, match="out of range"):
        ttgt.einsum_expression("ij,jk->ik", (2, 3), (3, 4), constants=[2])
    with pytest.raises(ValueError, match="every operand is constant"):
        ttgt.einsum_expression("ij,jk->ik", a, b[:, :5].T, constants=[0, 1])
    with pytest.raises(ValueError, match="extent"):
        ttgt.einsum_expression("ij,jk->ik", (2, 3), np.ones((4, 4)), constants=[1])
    assert isinstance(e, ttgt.Expression)
    with pytest.raises(TypeError):
        ttgt.einsum_expression("ij,jk->ik", (2, 3), (3, 4), dtype=np.int64)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_memory_limit_no_order_meets_slices_the_network(dtype, rng):
    shapes = [(8, 30), (30, 30), (30, 30), (30, 8)]
    ops = [random(rng, s, dtype) for s in shapes]
    spec = "ij,jk,kl,lm->im"
    got = ttgt.einsum(spec, *ops, optimize=("auto", 40))
    assert_close(got, np.einsum(spec, *ops), dtype)
    plan = ttgt.Plan(spec, *ops, optimize=("auto", 40))
    assert "sliced over" in plan.explain()
    with pytest.raises(ValueError, match="memory limit"):
        ttgt.einsum(spec, *ops, optimize=("optimal", 40))
