#!/usr/bin/env python3
"""Compare `ttgt contract` (file mode) with numpy.einsum on random specs.

Usage: numpy_compare.py PATH_TO_TTGT_BINARY

Generates random one- and two-operand specs (plus a few three-operand ones): batch indices,
traces and diagonals, one-sided sums, outer products, `...` broadcasting, named indices of
extent 1 broadcast against larger ones, implicit outputs, extents 0..5. Operands are built as
transposed, sliced or negative-stride numpy views and saved in C or Fortran order; float32,
float64, complex64, complex128 and float16 are used, some cases mix them, some pass
--alpha/--beta/--c. Each result is compared with numpy.einsum (evaluated in double precision)
to a relative 1e-12 for float64/complex128, 1e-5 for float32/complex64 and 2e-3 for float16,
relative to max(1, max|want|); the result's dtype must be numpy's. A few bad inputs must exit with
status 2 and one line on stderr.

Then random networks of 4 to 6 operands run with each --path choice and are compared with
numpy.einsum the same way; with the optimal search, the path's FLOP count (from --explain) must
not exceed numpy.einsum_path(optimize='optimal')'s.

The seed is fixed (override with TTGT_NUMPY_SEED). Prints `N passed, M failed` at the end and
exits non-zero when something failed.
"""

import os
import re
import string
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
N_SPECS = 40
LETTERS = string.ascii_letters


def tol_for(dtype):
    if np.dtype(dtype) == np.float16:
        # the exact value rounded once to float16 (2^-11 relative), plus float32 sums
        return 2e-3
    return 1e-5 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-12


def random_array(rng, shape, dtype):
    a = np.asarray(rng.uniform(-1, 1, size=shape))
    if np.issubdtype(dtype, np.complexfloating):
        a = a + 1j * rng.uniform(-1, 1, size=shape)
    return np.asarray(a, dtype=dtype)


def odd_view(rng, a):
    """An array equal to `a` that is a transposed, sliced or negative-stride view."""
    kind = rng.choice(["plain", "transposed", "sliced", "negative"])
    if kind == "plain" or a.ndim == 0:
        return a
    if kind == "transposed":
        return np.ascontiguousarray(a.T).T
    if kind == "sliced":
        big = random_array(rng, tuple(2 * d + 1 for d in a.shape), a.dtype)
        idx = tuple(slice(1, None, 2) for _ in a.shape)
        big[idx] = a
        return big[idx]
    axis = int(rng.integers(a.ndim))
    flipped = np.ascontiguousarray(np.flip(a, axis))
    return np.flip(flipped, axis)


def save(rng, path, a):
    """Saves `a` in C or Fortran order (chosen at random); returns the order used."""
    order = str(rng.choice(["C", "F"]))
    # np.ascontiguousarray / np.asfortranarray make 0-d arrays 1-d: copy those instead.
    b = np.array(a, order=order, copy=True)
    assert b.shape == a.shape
    np.save(path, b)
    return order


def extent(rng):
    # Mostly 1..5, sometimes 0.
    return int(rng.choice([0, 1, 2, 3, 4, 5], p=[0.04, 0.16, 0.25, 0.25, 0.15, 0.15]))


# ---------------------------------------------------------------------------------------------
# Spec generators: each returns (spec, [shapes]).


def gen_binary(rng, diagonal=False, implicit=False):
    """A two-operand spec with random batch, contracted, free and one-sided summed indices."""
    letters = list(rng.permutation(list(LETTERS)))
    roles = {}
    for role, most in [("batch", 2), ("contr", 2), ("freeA", 2), ("freeB", 2), ("sumA", 1), ("sumB", 1)]:
        for _ in range(int(rng.integers(0, most + 1))):
            roles[letters.pop()] = role
    ext = {c: extent(rng) for c in roles}
    a = [c for c, r in roles.items() if r in ("batch", "contr", "freeA", "sumA")]
    b = [c for c, r in roles.items() if r in ("batch", "contr", "freeB", "sumB")]
    out = [c for c, r in roles.items() if r in ("batch", "freeA", "freeB")]
    a, b, out = (list(rng.permutation(x)) if x else [] for x in (a, b, out))
    if diagonal and a:
        c = str(rng.choice(a))
        a.insert(int(rng.integers(len(a) + 1)), c)
    spec = "".join(a) + "," + "".join(b)
    if not implicit:
        spec += "->" + "".join(out)
    return spec, [[ext[c] for c in a], [ext[c] for c in b]]


def gen_unary(rng):
    """Transposes, diagonals, traces and sums of one operand."""
    n = int(rng.integers(1, 4))
    letters = list(LETTERS[:n])
    ext = {c: extent(rng) for c in letters}
    term = list(letters)
    for _ in range(int(rng.integers(0, 2))):
        term.insert(int(rng.integers(len(term) + 1)), str(rng.choice(letters)))
    term = list(rng.permutation(term))
    if rng.random() < 0.2:
        return "".join(term), [[ext[c] for c in term]]
    keep = [c for c in letters if rng.random() < 0.6]
    out = list(rng.permutation(keep)) if keep else []
    return "".join(term) + "->" + "".join(out), [[ext[c] for c in term]]


def gen_outer(rng):
    na, nb = int(rng.integers(0, 3)), int(rng.integers(1, 3))
    a, b = list(LETTERS[:na]), list(LETTERS[na : na + nb])
    ext = {c: extent(rng) for c in a + b}
    out = list(rng.permutation(a + b))
    return "".join(a) + "," + "".join(b) + "->" + "".join(out), [[ext[c] for c in a], [ext[c] for c in b]]


def with_ellipsis(rng, letters, at):
    s = list(letters)
    s.insert(at, "...")
    return "".join(s)


def gen_ellipsis(rng):
    """`...` broadcasting: batch shapes broadcast against each other (1s stretched)."""
    nb = int(rng.integers(1, 3))
    full = [int(rng.integers(1, 4)) for _ in range(nb)]

    def part(width):
        return [1 if rng.random() < 0.3 else d for d in full[nb - width :]]

    wa, wb = nb, int(rng.integers(0, nb + 1))
    if rng.random() < 0.5:
        wa, wb = wb, wa
    ea, eb = part(wa), part(wb)
    kind = rng.choice(["matmul", "dot", "unary"])
    if kind == "unary":
        letters = ["i", "j"]
        ext = {"i": extent(rng), "j": extent(rng)}
        at = int(rng.integers(3))
        a = with_ellipsis(rng, letters, at)
        shape = [ext[c] for c in letters]
        shape[at:at] = full
        out = "->" + with_ellipsis(rng, ["j", "i"], int(rng.integers(3))) if rng.random() < 0.7 else ""
        return a + out, [shape]
    if kind == "matmul":
        la, lb, lo = ["i", "j"], ["j", "k"], ["i", "k"]
    else:
        la, lb, lo = ["i"], ["i"], []
    ext = {c: extent(rng) for c in "ijk"}
    pa, pb = int(rng.integers(len(la) + 1)), int(rng.integers(len(lb) + 1))
    sa = [ext[c] for c in la]
    sa[pa:pa] = ea
    sb = [ext[c] for c in lb]
    sb[pb:pb] = eb
    spec = with_ellipsis(rng, la, pa) + "," + with_ellipsis(rng, lb, pb)
    if rng.random() < 0.7:
        spec += "->" + with_ellipsis(rng, lo, int(rng.integers(len(lo) + 1)))
    return spec, [sa, sb]


def gen_letter_broadcast(rng):
    """Named indices at extent 1 in one operand and larger in another (numpy broadcasts them)."""
    spec, shapes = gen_binary(rng, diagonal=rng.random() < 0.3)
    terms = spec.split("->")[0].split(",")
    for k, t in enumerate(terms):
        other = terms[1 - k]
        for c in set(t):
            if c in other and rng.random() < 0.35:
                shapes[k] = [1 if x == c else e for x, e in zip(t, shapes[k])]
    return spec, shapes


def gen_three(rng):
    ext = {c: extent(rng) for c in "ijkl"}
    spec = rng.choice(["ij,jk,kl->il", "ij,jk,kl", "i,ij,j->", "ij,ik,il->jkl"])
    terms = spec.split("->")[0].split(",")
    return spec, [[ext[c] for c in t] for t in terms]


# Hand-picked cases first, then random ones.
FIXED = [
    ("ii", [[4, 4]]),
    ("ii->i", [[3, 3]]),
    ("iij->j", [[2, 2, 5]]),
    ("bij,bjk->bik", [[3, 2, 4], [3, 4, 5]]),
    ("i,j->ij", [[3], [4]]),
    ("ij,ij->", [[3, 4], [3, 4]]),
    ("...ij,...jk->...ik", [[2, 1, 3, 4], [5, 4, 2]]),
    ("abcd,dbef->acef", [[2, 3, 4, 5], [5, 3, 2, 3]]),
    ("bij,bjk->bik", [[1, 2, 4], [3, 4, 5]]),
    ("ij,jk", [[2, 1], [3, 4]]),
    ("ii,i->i", [[1, 1], [3]]),
]


def gen_spec(rng, n):
    if n < len(FIXED):
        return FIXED[n]
    kinds = [
        (0.30, lambda: gen_binary(rng)),
        (0.12, lambda: gen_binary(rng, diagonal=True)),
        (0.10, lambda: gen_binary(rng, implicit=True)),
        (0.13, lambda: gen_unary(rng)),
        (0.10, lambda: gen_outer(rng)),
        (0.14, lambda: gen_ellipsis(rng)),
        (0.06, lambda: gen_letter_broadcast(rng)),
        (0.05, lambda: gen_three(rng)),
    ]
    r = rng.random()
    for p, f in kinds:
        if r < p:
            return f()
        r -= p
    return gen_binary(rng)


# ---------------------------------------------------------------------------------------------


def complex_text(z):
    return f"{z.real!r}{z.imag:+}j"


def run(binary, args):
    return subprocess.run([binary] + args, capture_output=True, text=True, timeout=120)


def one_case(binary, rng, tmp, case_id, spec, shapes, dtype):
    """Runs one comparison; returns None or a failure message."""
    ops = []
    for k, shape in enumerate(shapes):
        t = dtype
        if k == 1 and rng.random() < 0.2:
            t = DTYPES[int(rng.integers(4))]  # mixed element types
        ops.append(random_array(rng, tuple(shape), t))
    args = ["contract", spec]
    orders = []
    for k, a in enumerate(ops):
        path = os.path.join(tmp, f"{case_id}_op{k}.npy")
        orders.append(save(rng, path, odd_view(rng, a)))
        args.append(path)
    out_path = os.path.join(tmp, f"{case_id}_out.npy")
    args += ["-o", out_path]

    wide = np.complex128 if any(np.iscomplexobj(a) for a in ops) else np.float64
    want = np.einsum(spec, *[a.astype(wide) for a in ops])
    want_dtype = np.result_type(*ops)
    r = rng.random()
    if r < 0.35:
        complex_scale = np.issubdtype(want_dtype, np.complexfloating) or rng.random() < 0.3
        if complex_scale:
            alpha = complex(round(rng.uniform(-2, 2), 3), round(rng.uniform(-2, 2), 3))
            beta = complex(round(rng.uniform(-2, 2), 3), round(rng.uniform(-2, 2), 3))
            want_dtype = np.result_type(want_dtype, np.complex64)
            args += ["--alpha", complex_text(alpha), "--beta", complex_text(beta)]
        else:
            alpha, beta = round(rng.uniform(-2, 2), 3), round(rng.uniform(-2, 2), 3)
            args += [f"--alpha={alpha!r}", f"--beta={beta!r}"]
        c0 = random_array(rng, np.shape(want), want_dtype)
        c_path = os.path.join(tmp, f"{case_id}_c0.npy")
        save(rng, c_path, odd_view(rng, c0))
        args += ["--c", c_path]
        want = alpha * want + beta * c0.astype(np.complex128 if np.iscomplexobj(c0) else np.float64)
    check = rng.random() < 0.25
    if check:
        args.append("--check")

    p = run(binary, args)
    where = f"{' '.join(args[:2])} [{', '.join(str(a.dtype) for a in ops)}; shapes {shapes}; orders {orders}]"
    if p.returncode != 0:
        return f"{where}: exit {p.returncode}: {p.stderr.strip()}"
    if check and not p.stdout.startswith("check: ok ("):
        return f"{where}: --check printed {p.stdout.strip()!r}"
    got = np.load(out_path)
    if got.dtype != want_dtype:
        return f"{where}: dtype {got.dtype}, numpy gives {want_dtype}"
    if got.shape != np.shape(want):
        return f"{where}: shape {got.shape}, numpy gives {np.shape(want)}"
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    if not err <= tol_for(want_dtype) * scale:
        return f"{where}: max abs error {err:.3e} (scale {scale:.3e})"
    return None


N_NETWORKS = 16


def gen_network(rng):
    """4 to 6 operands; every index in two operands (a bond), three (a hyperedge), or one
    operand and the output; extents 1..4."""
    n = int(rng.integers(4, 7))
    ops = [[] for _ in range(n)]
    out = []
    for c in LETTERS[: int(rng.integers(4, 10))]:
        r = rng.random()
        holders = rng.choice(n, size=3 if r < 0.15 else 1 if r < 0.3 else 2, replace=False)
        if any(len(ops[k]) >= 4 for k in holders):
            continue
        for k in holders:
            ops[k].append(c)
        if len(holders) == 1 or rng.random() < 0.2:
            out.append(c)
    for k in range(n):
        if not ops[k]:
            ops[k].append(LETTERS[20])  # a scalar would do too; keep every operand a tensor
            out.append(LETTERS[20])
    out = list(dict.fromkeys(out))
    ext = {c: int(rng.integers(1, 5)) for t in ops for c in t}
    spec = ",".join("".join(t) for t in ops) + "->" + "".join(out)
    return spec, [[ext[c] for c in t] for t in ops]


def network_case(binary, rng, tmp, case_id):
    """A random network through --path: values against numpy.einsum, and with the optimal
    search, FLOPs no more than numpy.einsum_path(optimize='optimal') counts."""
    spec, shapes = gen_network(rng)
    dtype = DTYPES[int(rng.integers(4))]
    path = ["auto", "optimal", "greedy", "left"][int(rng.integers(4))]
    ops = [random_array(rng, tuple(sh), dtype) for sh in shapes]
    args = ["contract", spec]
    for k, a in enumerate(ops):
        p = os.path.join(tmp, f"net{case_id}_op{k}.npy")
        save(rng, p, odd_view(rng, a))
        args.append(p)
    out_path = os.path.join(tmp, f"net{case_id}_out.npy")
    args += ["-o", out_path, "--path", path, "--explain"]
    where = f"{spec} {shapes} {np.dtype(dtype).name} --path {path}"
    p = run(binary, args)
    if p.returncode != 0:
        return f"{where}: exit {p.returncode}: {p.stderr.strip()}"
    wide = np.complex128 if np.iscomplexobj(ops[0]) else np.float64
    want = np.einsum(spec, *[a.astype(wide) for a in ops])
    got = np.load(out_path)
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    if got.shape != want.shape or not err <= tol_for(dtype) * scale:
        return f"{where}: shape {got.shape} vs {want.shape}, max abs error {err:.3e}"
    if path in ("auto", "optimal"):
        m = re.search(r"FLOPs ([0-9.e+-]+) \(one loop nest", p.stdout)
        info = np.einsum_path(spec, *ops, optimize="optimal")[1]
        n = re.search(r"Optimized FLOP count:\s*([0-9.e+-]+)", info)
        if not m or not n:
            return f"{where}: no FLOP count in {p.stdout!r}"
        ours, theirs = float(m.group(1)), float(n.group(1))
        if ours > theirs * (1 + 2e-3):
            return f"{where}: path FLOPs {ours:.4e} > numpy's optimal {theirs:.4e}"
    return None


def bad_inputs(binary, tmp):
    """Each bad input must exit 2 with one stderr line and nothing on stdout."""
    a = os.path.join(tmp, "bad_a.npy")
    np.save(a, np.ones((3, 4)))
    b = os.path.join(tmp, "bad_b.npy")
    np.save(b, np.ones((5, 6)))
    ints = os.path.join(tmp, "bad_int.npy")
    np.save(ints, np.ones((3, 4), dtype=np.int64))
    cases = [
        ["contract", "ij,jk->ik", a, b],  # extent mismatch
        ["contract", "ij,jk->ik", a],  # operand count
        ["contract", "ij,j%k", a, b],  # bad character
        ["contract", "ij->ji", os.path.join(tmp, "does_not_exist.npy")],
        ["contract", "ij->ji", ints],  # unsupported element type
        ["contract", "ij,jk", "--sizes", "i=2,j=2"],  # missing size
        ["contract", "ij,jk", "--sizes", "i=2,j=2,k=2", "--dtype", "i8"],
    ]
    failures = []
    for args in cases:
        p = run(binary, args)
        lines = p.stderr.splitlines()
        ok = (
            p.returncode == 2
            and p.stdout == ""
            and len(lines) == 1
            and lines[0].startswith("ttgt: error: ")
        )
        if not ok:
            failures.append(f"bad input {args[1:]}: exit {p.returncode}, stderr {p.stderr!r}")
    return len(cases), failures


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    binary = sys.argv[1]
    seed = int(os.environ.get("TTGT_NUMPY_SEED", "20240601"))
    rng = np.random.default_rng(seed)
    passed, failures = 0, []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(N_SPECS):
            spec, shapes = gen_spec(rng, i)
            for dtype in DTYPES + [np.float16]:
                case_id = f"{i}_{np.dtype(dtype).name}"
                try:
                    msg = one_case(binary, rng, tmp, case_id, spec, shapes, dtype)
                except Exception as e:  # numpy rejected the spec, or the run hung
                    msg = f"{spec} {shapes} {np.dtype(dtype).name}: {type(e).__name__}: {e}"
                if msg is None:
                    passed += 1
                else:
                    failures.append(msg)
        for i in range(N_NETWORKS):
            try:
                msg = network_case(binary, rng, tmp, i)
            except Exception as e:
                msg = f"network {i}: {type(e).__name__}: {e}"
            if msg is None:
                passed += 1
            else:
                failures.append(msg)
        n_bad, bad_failures = bad_inputs(binary, tmp)
        passed += n_bad - len(bad_failures)
        failures += bad_failures
    for f in failures:
        print("FAIL:", f)
    print(f"seed {seed}: {passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
