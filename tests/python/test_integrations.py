"""opt_einsum's backend='ttgt' and ttgt.pyscf: energies equal PySCF's own.

These need opt_einsum and PySCF; with TTGT_REQUIRE_PEERS=1 (set by the README's test
command and CI) a missing one fails the run instead of skipping."""

from __future__ import annotations

import numpy as np
import pytest
import ttgt
from conftest import assert_close, need


def test_opt_einsum_backend(rng):
    oe = need("opt_einsum")
    ops = [rng.standard_normal(s) for s in [(6, 7), (7, 8, 9), (9, 5), (8, 5)]]
    spec = "ij,jkl,lm,km->i"
    got = oe.contract(spec, *ops, backend="ttgt")
    assert_close(got, np.einsum(spec, *ops), np.float64)
    a, b = rng.standard_normal((5, 6, 7)), rng.standard_normal((7, 6))
    assert_close(oe.contract("abc,cb->a", a, b, backend="ttgt"), np.einsum("abc,cb->a", a, b), np.float64)


@pytest.fixture(scope="module")
def water():
    need("pyscf")
    from pyscf import gto, scf

    mol = gto.M(atom="O 0 0 0; H 0 -0.757 0.587; H 0 0.757 0.587", basis="6-31g", verbose=0)
    return scf.RHF(mol).run(conv_tol=1e-12)


def _energies(mf):
    from pyscf import cc, scf

    rcc = cc.RCCSD(mf).run(conv_tol=1e-10)
    et = rcc.ccsd_t()
    ucc = cc.UCCSD(scf.addons.convert_to_uhf(mf)).run(conv_tol=1e-10)
    return rcc.e_corr, et, ucc.e_corr


def test_pyscf_energies_equal_pyscfs_own(water):
    import ttgt.pyscf as tp

    ref = _energies(water)
    counted = {"n": 0}
    inner = tp._api.einsum

    def counting(*args, **kwargs):
        counted["n"] += 1
        return inner(*args, **kwargs)

    tp._api.einsum = counting
    tp.install()
    try:
        got = _energies(water)
    finally:
        tp.uninstall()
        tp._api.einsum = inner
    assert counted["n"] > 50, "PySCF's einsum calls did not reach ttgt"
    for r, g in zip(ref, got):
        assert abs(r - g) < 1e-10, (ref, got)


def test_pyscf_install_and_uninstall_restore():
    need("pyscf")
    import ttgt.pyscf as tp
    from pyscf import lib
    from pyscf.cc import gintermediates

    own = lib.einsum
    tp.install()
    tp.install()
    assert lib.einsum is tp.einsum and gintermediates.einsum is tp.einsum and tp.installed()
    tp.uninstall()
    assert lib.einsum is own and gintermediates.einsum is own and not tp.installed()


def test_pyscf_contract_semantics(rng):
    need("pyscf")
    import ttgt.pyscf as tp
    from pyscf.lib import numpy_helper

    a, b = rng.standard_normal((6, 7, 8)), rng.standard_normal((8, 7, 9))
    for alpha, beta in [(1, 0), (2.0, 0.5), (0.5, 1)]:
        out0 = rng.standard_normal((6, 9))
        want = numpy_helper.contract("ijk,kjl->il", a, b, alpha=alpha, beta=beta, out=out0.copy())
        got = tp.contract("ijk,kjl->il", a, b, alpha=alpha, beta=beta, out=out0.copy())
        assert_close(got, want, np.float64)
    assert_close(tp.einsum("ij,jk,kl->il", a[:, 0], b[:, 0], np.ones((9, 2))), np.einsum("ij,jk,kl->il", a[:, 0], b[:, 0], np.ones((9, 2))), np.float64)
    assert ttgt.einsum is not None
