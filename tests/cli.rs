//! End-to-end tests of the `ttgt` binary: `.npy` round trips for the four element types,
//! C and Fortran order, alpha/beta with `--c`, random mode with `--check --json`, and one-line
//! errors with exit status 2 for bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ndarray::{ArrayD, IxDyn, ShapeBuilder};
use ndarray_npy::{read_npy, write_npy, ReadableElement, WritableElement};
use num_complex::{Complex32, Complex64};
use tempfile::TempDir;
use ttgt::Element;

/// Runs the binary with `args`.
fn ttgt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args(args)
        .output()
        .expect("the ttgt binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// One JSON value per line of `out`.
fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Asserts exit status 0 and returns stdout.
fn ok(args: &[&str]) -> String {
    let o = ttgt(args);
    assert_eq!(
        o.status.code(),
        Some(0),
        "ttgt {args:?} failed: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Deterministic, not too regular test values (complex ones get both parts).
fn values<T: Element>(shape: &[usize], salt: usize) -> ArrayD<T> {
    let mut k = salt;
    let mut next = move || {
        k = (k * 1103515245 + 12345) % (1 << 31);
        (k % 2001) as f64 / 1000.0 - 1.0
    };
    ArrayD::from_shape_fn(IxDyn(shape), |_| {
        let re = next();
        let im = next();
        T::from_parts(re, im)
    })
}

/// The same array stored in Fortran (column-major) memory order.
fn fortran<T: Element>(a: &ArrayD<T>) -> ArrayD<T> {
    let mut f = ArrayD::from_elem(IxDyn(a.shape()).f(), T::zero());
    f.assign(a);
    assert!(a.ndim() < 2 || !f.is_standard_layout());
    f
}

struct Files {
    dir: TempDir,
}

impl Files {
    fn new() -> Self {
        Files {
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `a` to `name` and returns the path as a string.
    fn put<T: WritableElement>(&self, name: &str, a: &ArrayD<T>) -> String {
        let p = self.path(name);
        write_npy(&p, a).expect("write npy");
        s(&p)
    }
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn read<T: ReadableElement>(p: &str) -> ArrayD<T> {
    read_npy(p).unwrap_or_else(|e| panic!("reading {p}: {e}"))
}

/// Asserts `|got - want| <= tol * max(1, max |want|)` elementwise, shapes equal.
fn assert_close<T: Element>(got: &ArrayD<T>, want: &ArrayD<T>, tol: f64) {
    assert_eq!(got.shape(), want.shape());
    let scale = want.iter().map(|x| x.abs_f64()).fold(1.0, f64::max);
    for (g, w) in got.iter().zip(want) {
        let d = (*g - *w).abs_f64();
        assert!(d <= tol * scale, "got {g}, want {w} (scale {scale})");
    }
}

fn tol<T: Element>() -> f64 {
    match T::DTYPE {
        ttgt::DType::F32 | ttgt::DType::C32 => 1e-5,
        _ => 1e-12,
    }
}

/// `ij,jk->ik`-style round trip of one element type, with `a_f`/`b_f` choosing Fortran order.
fn round_trip<T: Element + WritableElement + ReadableElement>(
    spec: &str,
    sa: &[usize],
    sb: &[usize],
    a_f: bool,
    b_f: bool,
) {
    let f = Files::new();
    let a = values::<T>(sa, 1);
    let b = values::<T>(sb, 2);
    let pa = f.put("a.npy", &if a_f { fortran(&a) } else { a.clone() });
    let pb = f.put("b.npy", &if b_f { fortran(&b) } else { b.clone() });
    let pc = s(&f.path("c.npy"));
    let out = ok(&["contract", spec, &pa, &pb, "-o", &pc]);
    assert_eq!(out, "", "file mode with -o prints nothing");
    let want = ttgt::reference::einsum(spec, &[a.view(), b.view()]).unwrap();
    let got: ArrayD<T> = read(&pc);
    assert!(got.is_standard_layout());
    assert_close(&got, &want, tol::<T>());
}

#[test]
fn round_trip_all_dtypes() {
    round_trip::<f32>("ij,jk->ik", &[3, 4], &[4, 5], false, false);
    round_trip::<f64>("ij,jk->ik", &[3, 4], &[4, 5], false, false);
    round_trip::<Complex32>("ij,jk->ik", &[3, 4], &[4, 5], false, false);
    round_trip::<Complex64>("ij,jk->ik", &[3, 4], &[4, 5], false, false);
}

/// The bytes of a version 1.0 `.npy` file of 2-byte elements (`descr` `<f2` or `<V2`), C
/// order, written here as numpy writes them.
fn half_npy(descr: &str, shape: &[usize], bits: &[u16]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut dict = format!(
        "{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}",
        dims.join(", ")
    );
    dict.push_str(&" ".repeat((64 - (10 + dict.len() + 1) % 64) % 64));
    dict.push('\n');
    let mut f = b"\x93NUMPY\x01\x00".to_vec();
    f.extend((dict.len() as u16).to_le_bytes());
    f.extend(dict.as_bytes());
    f.extend(bits.iter().flat_map(|b| b.to_le_bytes()));
    f
}

/// The descriptor, shape and element bits of a 2-byte `.npy` file `ttgt` wrote.
fn read_half_npy(p: &str) -> (String, Vec<usize>, Vec<u16>) {
    let bytes = std::fs::read(p).unwrap();
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    assert_eq!((10 + len) % 64, 0, "data aligned to 64 bytes");
    let header = String::from_utf8_lossy(&bytes[10..10 + len]).to_string();
    let descr = header.split('\'').nth(3).unwrap().to_string();
    let shape_text = header.split('(').nth(1).unwrap().split(')').next().unwrap();
    let shape: Vec<usize> = shape_text
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| x.trim().parse().unwrap())
        .collect();
    assert!(header.contains("'fortran_order': False"), "{header}");
    let bits = bytes[10 + len..]
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    (descr, shape, bits)
}

/// float16 and bfloat16 `.npy` files in and out: the result is the exact product (computed
/// in f64) rounded once to the storage type, within one unit of f32 accumulation.
#[test]
fn round_trip_half_types() {
    use ttgt::tensor::{bf16, f16};
    let f = Files::new();
    let (m, k, n) = (3usize, 40usize, 5usize);
    let av: Vec<f64> = (0..m * k)
        .map(|x| ((x * 7) % 13) as f64 * 0.25 - 1.5)
        .collect();
    let bv: Vec<f64> = (0..k * n)
        .map(|x| ((x * 5) % 11) as f64 * 0.125 - 0.5)
        .collect();
    for (descr, to, back) in [
        (
            "<f2",
            (|x| f16::from_f64(x).to_bits()) as fn(f64) -> u16,
            (|b| f16::from_bits(b).to_f64()) as fn(u16) -> f64,
        ),
        (
            "<V2",
            |x| bf16::from_f64(x).to_bits(),
            |b| bf16::from_bits(b).to_f64(),
        ),
    ] {
        let a: Vec<u16> = av.iter().map(|&x| to(x)).collect();
        let b: Vec<u16> = bv.iter().map(|&x| to(x)).collect();
        let pa = f.path("a.npy");
        let pb = f.path("b.npy");
        std::fs::write(&pa, half_npy(descr, &[m, k], &a)).unwrap();
        std::fs::write(&pb, half_npy(descr, &[k, n], &b)).unwrap();
        let pc = s(&f.path("c.npy"));
        ok(&["contract", "ij,jk->ik", &s(&pa), &s(&pb), "-o", &pc]);
        let (d, shape, c) = read_half_npy(&pc);
        assert_eq!((d.as_str(), shape.as_slice()), (descr, &[m, n][..]));
        for i in 0..m {
            for j in 0..n {
                let exact: f64 = (0..k)
                    .map(|l| back(a[i * k + l]) * back(b[l * n + j]))
                    .sum();
                assert_eq!(c[i * n + j], to(exact), "{descr} at ({i}, {j})");
            }
        }
        // printed without -o, and checked
        let out = ok(&["contract", "ij,jk->ik", &s(&pa), &s(&pb), "--check"]);
        assert!(
            out.contains(if descr == "<f2" {
                "float16"
            } else {
                "bfloat16"
            }),
            "{out}"
        );
    }
}

/// `-o` naming an input (directly or through another path) is refused before anything is
/// written; a successful `-o` leaves only the result in the directory (no temporary file).
#[test]
fn output_never_overwrites_an_input() {
    let f = Files::new();
    let (a, b) = (values::<f64>(&[3, 4], 1), values::<f64>(&[4, 2], 2));
    let (pa, pb) = (f.put("a.npy", &a), f.put("b.npy", &b));
    let before = std::fs::read(&pa).unwrap();
    let dotted = s(&f.path(".").join("a.npy"));
    for out in [&pa, &dotted] {
        let o = ttgt(&["contract", "ij,jk->ik", &pa, &pb, "-o", out]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("is the input"), "{}", stderr(&o));
        assert_eq!(std::fs::read(&pa).unwrap(), before);
    }
    let c0 = f.put("c0.npy", &values::<f64>(&[3, 2], 3));
    let o = ttgt(&["contract", "ij,jk->ik", &pa, &pb, "--c", &c0, "-o", &c0]);
    assert!(stderr(&o).contains("is the input"), "{}", stderr(&o));
    let pc = s(&f.path("c.npy"));
    ok(&["contract", "ij,jk->ik", &pa, &pb, "-o", &pc]);
    let mut names: Vec<String> = std::fs::read_dir(f.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.npy", "b.npy", "c.npy", "c0.npy"]);
    let want = ttgt::reference::einsum("ij,jk->ik", &[a.view(), b.view()]).unwrap();
    assert_close(&read::<f64>(&pc), &want, 1e-12);
}

/// A stored profile that does not parse is reported once on stderr; the call runs on the
/// built-in values.
#[test]
fn corrupt_profile_is_reported_once() {
    let f = Files::new();
    let p = f.path("profile.json");
    std::fs::write(&p, "{half a profile").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args([
            "contract",
            "ij,jk->ik",
            "--sizes",
            "i=300,j=300,k=300",
            "--repeat",
            "2",
        ])
        .env("TTGT_PROFILE", &p)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(
        err.matches("ignoring the calibration profile").count(),
        1,
        "{err}"
    );
    assert!(err.contains("ttgt calibrate"), "{err}");
}

#[test]
fn fortran_order_inputs() {
    let f = Files::new();
    let p = f.put("f.npy", &fortran(&values::<f64>(&[2, 3], 3)));
    let header = std::fs::read(&p).unwrap();
    let text = String::from_utf8_lossy(&header[..64]);
    assert!(text.contains("'fortran_order': True"), "{text}");
    for (a_f, b_f) in [(true, false), (false, true), (true, true)] {
        round_trip::<f64>("abcd,dbef->acef", &[2, 3, 4, 5], &[5, 3, 2, 3], a_f, b_f);
        round_trip::<Complex32>("bij,bjk->bik", &[3, 2, 4], &[3, 4, 5], a_f, b_f);
        round_trip::<f32>("ij,kj->ki", &[4, 3], &[5, 3], a_f, b_f);
        round_trip::<Complex64>("ijk,kl", &[2, 3, 4], &[4, 2], a_f, b_f);
    }
}

#[test]
fn alpha_beta_with_c() {
    let f = Files::new();
    let a = values::<f64>(&[3, 4], 4);
    let b = values::<f64>(&[4, 5], 5);
    let c0 = values::<f64>(&[3, 5], 6);
    let (pa, pb, pc0) = (f.put("a.npy", &a), f.put("b.npy", &b), f.put("c0.npy", &c0));
    let pc = s(&f.path("c.npy"));
    let r = ttgt::reference::einsum("ij,jk->ik", &[a.view(), b.view()]).unwrap();

    ok(&[
        "contract",
        "ij,jk->ik",
        &pa,
        &pb,
        "-o",
        &pc,
        "--alpha",
        "2",
        "--beta",
        "-0.5",
        "--c",
        &pc0,
    ]);
    assert_close(&read::<f64>(&pc), &(&r * 2.0 - &c0 * 0.5), 1e-12);

    // --c without --beta accumulates (beta = 1).
    ok(&["contract", "ij,jk->ik", &pa, &pb, "-o", &pc, "--c", &pc0]);
    assert_close(&read::<f64>(&pc), &(&r + &c0), 1e-12);

    // --beta without --c: C starts at zero.
    ok(&[
        "contract",
        "ij,jk->ik",
        &pa,
        &pb,
        "-o",
        &pc,
        "--beta",
        "3",
        "--alpha=-1",
    ]);
    assert_close(&read::<f64>(&pc), &(&r * -1.0), 1e-12);

    // A Fortran-order C_in.
    let pcf = f.put("c0f.npy", &fortran(&c0));
    ok(&[
        "contract",
        "ij,jk->ik",
        &pa,
        &pb,
        "-o",
        &pc,
        "--c",
        &pcf,
        "--beta",
        "2",
        "--check",
    ]);
    assert_close(&read::<f64>(&pc), &(&r + &c0 * 2.0), 1e-12);
}

#[test]
fn complex_alpha_beta() {
    let f = Files::new();
    let a = values::<Complex64>(&[2, 3, 4], 7);
    let b = values::<Complex64>(&[4, 3], 8);
    let c0 = values::<Complex64>(&[4, 2], 9);
    let (pa, pb, pc0) = (f.put("a.npy", &a), f.put("b.npy", &b), f.put("c0.npy", &c0));
    let pc = s(&f.path("c.npy"));
    let r = ttgt::reference::einsum("ijk,kj->ki", &[a.view(), b.view()]).unwrap();
    let out = ok(&[
        "contract",
        "ijk,kj->ki",
        &pa,
        &pb,
        "-o",
        &pc,
        "--alpha",
        "1-2j",
        "--beta",
        "0.5j",
        "--c",
        &pc0,
        "--check",
    ]);
    assert!(out.starts_with("check: ok ("), "{out}");
    let (al, be) = (Complex64::new(1.0, -2.0), Complex64::new(0.0, 0.5));
    let want = r.mapv(|x| x * al) + c0.mapv(|x| x * be);
    assert_close(&read::<Complex64>(&pc), &want, 1e-12);

    // A complex alpha makes real operands' result complex (numpy: f32 -> complex64).
    let x = values::<f32>(&[3, 4], 10);
    let y = values::<f32>(&[4], 11);
    let (px, py) = (f.put("x.npy", &x), f.put("y.npy", &y));
    ok(&["contract", "ij,j->i", &px, &py, "-o", &pc, "--alpha", "2j"]);
    let got: ArrayD<Complex32> = read(&pc);
    let r = ttgt::reference::einsum("ij,j->i", &[x.view(), y.view()]).unwrap();
    let want = r.mapv(|v| Complex32::new(0.0, 2.0 * v));
    assert_close(&got, &want, 1e-5);
}

#[test]
fn mixed_dtypes_promote() {
    let f = Files::new();
    let a32 = values::<f32>(&[3, 4], 12);
    let b64 = values::<f64>(&[4, 2], 13);
    let pc = s(&f.path("c.npy"));
    let (pa, pb) = (f.put("a.npy", &a32), f.put("b.npy", &b64));
    ok(&["contract", "ij,jk->ik", &pa, &pb, "-o", &pc]);
    let a64 = a32.mapv(f64::from);
    let want = ttgt::reference::einsum("ij,jk->ik", &[a64.view(), b64.view()]).unwrap();
    assert_close(&read::<f64>(&pc), &want, 1e-12);

    // f64 with complex64 gives complex128.
    let bz = values::<Complex32>(&[4, 2], 14);
    let pbz = f.put("bz.npy", &bz);
    let pa64 = f.put("a64.npy", &a64);
    ok(&["contract", "ij,jk->ik", &pa64, &pbz, "-o", &pc]);
    let wa = a64.mapv(|x| Complex64::new(x, 0.0));
    let wb = bz.mapv(|z| Complex64::new(z.re.into(), z.im.into()));
    let want = ttgt::reference::einsum("ij,jk->ik", &[wa.view(), wb.view()]).unwrap();
    assert_close(&read::<Complex64>(&pc), &want, 1e-6);
}

#[test]
fn unary_specs_and_printing() {
    let f = Files::new();
    let m = values::<f64>(&[4, 4], 15);
    let pm = f.put("m.npy", &m);
    let trace: f64 = (0..4).map(|i| m[[i, i]]).sum();
    let out = ok(&["contract", "ii", &pm]);
    let printed: f64 = out.trim().parse().expect("a number");
    assert!((printed - trace).abs() < 1e-9, "{out}");

    let pc = s(&f.path("d.npy"));
    for spec in ["ii->i", "ij->ji", "ij->", "ij->j"] {
        ok(&["contract", spec, &pm, "-o", &pc, "--check"]);
        let want = ttgt::reference::einsum(spec, &[m.view()]).unwrap();
        assert_close(&read::<f64>(&pc), &want, 1e-12);
    }
    // an array is printed under its numpy dtype and shape
    let printed = ok(&["contract", "ii->i", &pm]);
    assert!(
        printed.starts_with("float64 array of shape (4,):\n["),
        "{printed}"
    );
    let pc32 = f.put("m32.npy", &values::<num_complex::Complex32>(&[2, 3], 3));
    let printed = ok(&["contract", "ij->ji", &pc32]);
    assert!(
        printed.starts_with("complex64 array of shape (3, 2):\n"),
        "{printed}"
    );
    let pmf = f.put("mf.npy", &fortran(&m));
    ok(&["contract", "ij->ji", &pmf, "-o", &pc]);
    assert_close(&read::<f64>(&pc), &m.t().to_owned(), 0.0);
}

#[test]
fn three_operands_and_broadcasting() {
    let f = Files::new();
    let a = values::<f64>(&[2, 3], 16);
    let b = values::<f64>(&[3, 4], 17);
    let c = values::<f64>(&[4, 2], 18);
    let c0 = values::<f64>(&[2, 2], 19);
    let ps = [f.put("a.npy", &a), f.put("b.npy", &b), f.put("c.npy", &c)];
    let pc0 = f.put("c0.npy", &c0);
    let po = s(&f.path("o.npy"));
    ok(&[
        "contract",
        "ij,jk,kl->il",
        &ps[0],
        &ps[1],
        &ps[2],
        "-o",
        &po,
        "--alpha",
        "3",
        "--beta",
        "-1",
        "--c",
        &pc0,
        "--check",
    ]);
    let r = ttgt::reference::einsum("ij,jk,kl->il", &[a.view(), b.view(), c.view()]).unwrap();
    assert_close(&read::<f64>(&po), &(&r * 3.0 - &c0), 1e-12);

    let x = values::<f64>(&[5, 1, 2, 3], 20);
    let y = values::<f64>(&[4, 3, 2], 21);
    let (px, py) = (f.put("x.npy", &x), f.put("y.npy", &y));
    ok(&["contract", "...ij,...jk", &px, &py, "-o", &po, "--check"]);
    let want = ttgt::reference::einsum("...ij,...jk", &[x.view(), y.view()]).unwrap();
    assert_eq!(want.shape(), &[5, 4, 2, 2]);
    assert_close(&read::<f64>(&po), &want, 1e-12);
}

#[test]
fn networks_follow_the_chosen_path() {
    // File mode: every --path gives the reference's result; --explain prints the path.
    let f = Files::new();
    let (a, b, c, d) = (
        values::<f64>(&[3, 4], 30),
        values::<f64>(&[4, 5], 31),
        values::<f64>(&[5, 2], 32),
        values::<f64>(&[2, 3], 33),
    );
    let ps = [
        f.put("a.npy", &a),
        f.put("b.npy", &b),
        f.put("c.npy", &c),
        f.put("d.npy", &d),
    ];
    let po = s(&f.path("o.npy"));
    let spec = "ij,jk,kl,lm->im";
    let want = ttgt::reference::einsum(spec, &[a.view(), b.view(), c.view(), d.view()]).unwrap();
    for path in [
        "auto",
        "optimal",
        "greedy",
        "left",
        "[(2, 3), (1, 2), (0, 1)]",
        "0,3;0,2;0,1",
        "['einsum_path', (1,), (0, 1, 2), (0, 1)]",
        "3;0,1,2,3",
    ] {
        let out = ok(&[
            "contract",
            spec,
            &ps[0],
            &ps[1],
            &ps[2],
            &ps[3],
            "-o",
            &po,
            "--path",
            path,
            "--explain",
            "--check",
        ]);
        assert!(out.contains("path for ij,jk,kl,lm->im"), "{path}: {out}");
        assert!(out.contains("step 2:"), "{path}: {out}");
        assert!(out.contains("check: ok"), "{path}: {out}");
        assert_close(&read::<f64>(&po), &want, 1e-12);
    }
    // numpy's path for one operand, `(0,)`, and for two, `(0, 1)`: accepted and checked.
    for (spec, sizes, path) in [("ii->i", "i=5", "[(0,)]"), ("ij,jk", "i=5,j=3,k=2", "0,1")] {
        let out = ok(&[
            "contract", spec, "--sizes", sizes, "--path", path, "--check",
        ]);
        assert!(out.contains("check: ok"), "{spec} {path}: {out}");
    }
    // Random mode: timed step by step, JSON with the path's FLOPs and each step.
    let sizes = "a=6,b=6,c=6,d=6,e=6,f=6,g=6,h=6";
    let out = ok(&[
        "contract",
        "ea,fb,abcd,gc,hd->efgh",
        "--sizes",
        sizes,
        "--json",
        "--check",
        "--repeat",
        "2",
        "--dtype",
        "c32",
    ]);
    let j = json_line(&out);
    assert_eq!(j["check"], "ok", "{out}");
    assert!(j["path_strategy"]
        .as_str()
        .is_some_and(|s| s.starts_with("predicted time")));
    assert!(j["predicted_seconds"].as_f64().is_some_and(|t| t > 0.0));
    assert!(j["flop_path_predicted_seconds"].as_f64() >= j["predicted_seconds"].as_f64());
    assert_eq!(j["flops"].as_f64(), Some(4.0 * 2.0 * 6f64.powi(5)));
    assert_eq!(j["naive_flops"].as_f64(), Some(5.0 * 6f64.powi(8)));
    assert_eq!(j["steps"].as_array().map(Vec::len), Some(4));
    assert!(j["seconds"].as_f64().is_some_and(|t| t > 0.0));
    let human = ok(&[
        "contract",
        "ea,fb,abcd,gc,hd->efgh",
        "--sizes",
        sizes,
        "--path",
        "left",
        "--check",
        "--explain",
    ]);
    assert!(human.contains("(left to right)"), "{human}");
    assert!(human.contains("ea,fb->"), "{human}");
    assert!(human.contains("check: ok"), "{human}");
    // a memory limit no order meets: the default path slices, and the result checks
    let sliced = ok(&[
        "contract",
        "ij,jk,kl,lm->im",
        "--sizes",
        "i=8,j=30,k=30,l=30,m=8",
        "--memory-limit",
        "40",
        "--check",
        "--explain",
    ]);
    assert!(sliced.contains("sliced over"), "{sliced}");
    assert!(sliced.contains("check: ok"), "{sliced}");
}

#[test]
fn zero_extents() {
    let f = Files::new();
    let a = ArrayD::<f64>::zeros(IxDyn(&[2, 0]));
    let b = ArrayD::<f64>::zeros(IxDyn(&[0, 3]));
    let c0 = values::<f64>(&[2, 3], 22);
    let (pa, pb, pc0) = (f.put("a.npy", &a), f.put("b.npy", &b), f.put("c0.npy", &c0));
    let pc = s(&f.path("c.npy"));
    ok(&[
        "contract",
        "ij,jk->ik",
        &pa,
        &pb,
        "-o",
        &pc,
        "--c",
        &pc0,
        "--beta",
        "2",
        "--check",
    ]);
    assert_close(&read::<f64>(&pc), &(&c0 * 2.0), 0.0);
    ok(&["contract", "ji,jk->ik", &pb, &pb, "-o", &pc]);
    assert_eq!(read::<f64>(&pc).shape(), &[3, 3]);
}

fn json_line(out: &str) -> serde_json::Value {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one JSON object per line: {out}");
    serde_json::from_str(lines[0]).expect("valid JSON")
}

#[test]
fn random_mode_json() {
    let out = ok(&[
        "contract",
        "abc,cd->abd",
        "--sizes",
        "a=5,b=6,c=7,d=8",
        "--check",
        "--json",
        "--repeat",
        "2",
        "--seed",
        "7",
    ]);
    let v = json_line(&out);
    assert_eq!(v["spec"], "abc,cd->abd");
    assert_eq!(v["dtype"], "f64");
    assert_eq!(v["repeat"], 2);
    assert_eq!(v["check"], "ok");
    assert_eq!(v["check_elements"], 5 * 6 * 8);
    assert!(v["check_max_rel_err"].as_f64().unwrap() <= 1e-10);
    assert_eq!(v["flops"].as_f64(), Some(2.0 * 5.0 * 6.0 * 7.0 * 8.0));
    let sizes = v["sizes"].as_object().unwrap();
    assert_eq!(sizes.len(), 4);
    assert_eq!(sizes["a"], 5);
    assert_eq!(sizes["d"], 8);
    let seconds = v["seconds"].as_f64().unwrap();
    assert!(seconds > 0.0);
    assert!(v["gflops"].as_f64().unwrap() > 0.0);
    let mut steps = 0.0;
    for key in [
        "prepare_seconds",
        "pack_a_seconds",
        "pack_b_seconds",
        "gemm_seconds",
        "write_c_seconds",
    ] {
        let t = v[key].as_f64().unwrap_or_else(|| panic!("{key} in {v}"));
        assert!(t >= 0.0);
        steps += t;
    }
    assert!(steps <= seconds * 1.0001 + 1e-9);
    let transpose = v["pack_a_seconds"].as_f64().unwrap()
        + v["pack_b_seconds"].as_f64().unwrap()
        + v["write_c_seconds"].as_f64().unwrap();
    assert!((v["transpose_seconds"].as_f64().unwrap() - transpose).abs() < 1e-9);
    assert!(v["explain"].is_null());

    // No --check: "check" is null; --explain goes into the JSON object.
    let v = json_line(&ok(&[
        "contract",
        "ij,jk",
        "--sizes",
        "i=3,j=4,k=5",
        "--json",
        "--dtype",
        "c32",
        "--explain",
        "--threads",
        "1",
    ]));
    assert!(v["check"].is_null());
    assert_eq!(v["dtype"], "c32");
    assert_eq!(v["repeat"], 5);
    assert_eq!(v["threads"], 1);
    assert!(v["explain"].as_str().unwrap().contains("GEMM"));
}

#[test]
fn random_mode_all_dtypes_check() {
    for dtype in ["f32", "f64", "c32", "c64", "f16", "bf16"] {
        for (spec, sizes) in [
            ("abcd,dbef->acef", "a=3,b=4,c=5,d=2,e=3,f=4"),
            ("bij,bjk->bik", "b=3,i=4,j=5,k=6"),
            ("ii->i", "i=7"),
            ("ij,j->", "i=4,j=9"),
            ("i,j->ij", "i=3,j=4"),
            ("ij,jk->ik", "i=0,j=3,k=2"),
        ] {
            let out = ok(&[
                "contract", spec, "--sizes", sizes, "--dtype", dtype, "--check", "--repeat", "1",
            ]);
            assert!(out.contains("GFLOP/s"), "{out}");
            assert!(out.contains("GEMM"), "{out}");
            assert!(out.lines().any(|l| l.starts_with("check: ok (")), "{out}");
        }
    }
}

#[test]
fn random_mode_human_explain_and_seed() {
    let run = |seed: &str| {
        ok(&[
            "contract",
            "ij,jk->ik",
            "--sizes",
            "i=4,j=4,k=4",
            "--json",
            "--check",
            "--seed",
            seed,
        ])
    };
    // The check's error depends on the operands only: same seed, same values.
    assert_eq!(
        json_line(&run("3"))["check_max_rel_err"],
        json_line(&run("3"))["check_max_rel_err"]
    );
    let out = ok(&[
        "contract",
        "abc,bd->acd",
        "--sizes",
        "a=4,b=5,c=6,d=3",
        "--explain",
    ]);
    assert!(out.starts_with("plan for"), "{out}");
    assert!(out.contains("best of 5"), "{out}");
    assert!(out.contains("pack A") && out.contains("write C"), "{out}");
}

/// Bad inputs: status 2, nothing on stdout, one stderr line naming the problem.
#[test]
fn bad_inputs() {
    let f = Files::new();
    let a = f.put("a.npy", &values::<f64>(&[3, 4], 23));
    let b = f.put("b.npy", &values::<f64>(&[5, 6], 24));
    let v = f.put("v.npy", &values::<f64>(&[4], 25));
    let c_bad = f.put("c_bad.npy", &values::<f64>(&[4, 3], 26));
    let ints = f.put("ints.npy", &ArrayD::<i64>::zeros(IxDyn(&[3, 4])));
    let junk = s(&f.path("junk.npy"));
    std::fs::write(&junk, b"not an npy file at all").unwrap();
    let truncated = s(&f.path("trunc.npy"));
    let bytes = std::fs::read(&a).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 8]).unwrap();
    let missing = s(&f.path("missing.npy"));
    let out = s(&f.path("out.npy"));
    let no_dir = s(&f.path("no/such/dir/out.npy"));

    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["ij,j$k", &a, &b], vec!["'$'", "position 4"]),
        (vec!["ij,jk->ii", &a, &b], vec!["twice"]),
        (vec!["ij->k", &a], vec!["'k'", "no input"]),
        (vec!["ij-k", &a], vec!["position"]),
        (vec!["ij,jk", "--sizes", "i=2,j=3"], vec!["'k'", "k=N"]),
        (
            vec!["ij,jk->ik", &a, &b],
            vec!["'j'", "operand 0", "operand 1", "a.npy", "b.npy"],
        ),
        (vec!["ij,jk->ik", &a], vec!["2 input operand", "1 file"]),
        (vec!["ij->i", &a, &b], vec!["1 input operand", "2 file"]),
        (vec!["ijk,kl", &a, &b], vec!["rank"]),
        (
            vec!["ij,jk", &a, &missing],
            vec!["cannot read", "missing.npy"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--dtype", "i8"],
            vec!["unknown dtype", "i8"],
        ),
        (
            vec!["ij,j->i", &a, &v, "--c", &c_bad],
            vec!["--c", "[4, 3]", "[3]"],
        ),
        (
            vec!["ij->ij", &a, "--c", &c_bad, "-o", &out, "--beta", "0"],
            vec!["--c", "shape"],
        ),
        (vec!["ij->ji", &ints], vec!["element type", "ints.npy"]),
        (vec!["ij->ji", &junk], vec!["not a valid .npy"]),
        (vec!["ij->ji", &truncated], vec!["truncated"]),
        (vec!["ij->ji", &a, "-o", &no_dir], vec!["cannot write"]),
        (vec!["...ij,jk", "--sizes", "i=2,j=2,k=2"], vec!["'...'"]),
        (
            vec!["ij,jk", &a, "--sizes", "i=2,j=2,k=2"],
            vec!["--sizes", "input files"],
        ),
        (vec!["ij,jk", &a, &v, "--json"], vec!["--json", "--sizes"]),
        (
            vec!["ij,jk", &a, &v, "--measure", "5"],
            vec!["--measure", "--sizes"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--alpha", "2"],
            vec!["--alpha"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j2,k=2"],
            vec!["--sizes", "j2"],
        ),
        (vec!["ij,jk", "--sizes", "i=2,j=2,k=2,z=3"], vec!["'z'"]),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--repeat", "0"],
            vec!["--repeat"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--threads", "0"],
            vec!["--threads"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--threads", "100000"],
            vec!["--threads 100000", "at most 1024"],
        ),
        (
            vec!["ij,jk,kl", "--sizes", "i=2,j=2,k=2,l=2", "--path", "0,1"],
            vec!["invalid contraction path", "need 2 pairwise step(s)"],
        ),
        (
            vec![
                "ij,jk,kl",
                "--sizes",
                "i=2,j=2,k=2,l=2",
                "--path",
                "fastest",
            ],
            vec!["--path", "fastest", "greedy"],
        ),
        (
            vec!["ij,ij,ij->i", &a, &a, &a, "--path", "0,0;0,1"],
            vec!["names position 0 twice"],
        ),
        (
            vec![
                "ij,jk,kl",
                "--sizes",
                "i=9,j=9,k=9,l=9",
                "--memory-limit",
                "2",
                "--path",
                "optimal",
            ],
            vec!["memory limit of 2 elements"],
        ),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--path", "greedy"],
            vec!["--path", "3 or more operands"],
        ),
        (vec!["ij", &a, "--alpha", "1+"], vec!["--alpha", "1+"]),
        (vec!["ij", &a, "--beta", "x"], vec!["--beta"]),
        (vec!["ij,jk"], vec!["no operands"]),
        (
            vec!["ij,jk", "--sizes", "i=2,j=2,k=2", "--path", "0,2"],
            vec!["invalid contraction path", "names positions (0, 2)"],
        ),
    ];
    // Bad --path values for ij,jk,kl: the flag's own message, or the path's error.
    let invalid = "invalid contraction path";
    let paths = [
        (
            "0,1;0",
            vec![invalid, "need 2 pairwise step(s), the path has 1"],
        ),
        ("0,1,2", vec!["--path", "numpy's notation"]),
        ("[(0, 1), 2]", vec!["--path", "numpy's notation"]),
        ("[(0, (1)), (0, 1)]", vec!["--path", "numpy's notation"]),
        ("[(0, 1), ()]", vec!["--path", "numpy's notation"]),
        (
            "[(0, 5, 1)]",
            vec![invalid, "step 0 names positions (0, 5, 1)"],
        ),
    ];
    let path_cases = paths.into_iter().map(|(p, words)| {
        (
            vec!["ij,jk,kl", "--sizes", "i=2,j=2,k=2,l=2", "--path", p],
            words,
        )
    });
    for (args, words) in cases.into_iter().chain(path_cases) {
        let mut full = vec!["contract"];
        full.extend(&args);
        let o = ttgt(&full);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(stdout(&o), "", "{args:?}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {err}");
        assert!(lines[0].starts_with("ttgt: error: "), "{args:?}: {err}");
        for w in words {
            assert!(lines[0].contains(w), "{args:?}: {err} lacks {w:?}");
        }
    }
}

#[test]
fn usage_errors_and_help() {
    let o = ttgt(&["contract"]);
    assert_eq!(o.status.code(), Some(2));
    let o = ttgt(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = ttgt(&["contract", "ij", "--repeat", "many"]);
    assert_eq!(o.status.code(), Some(2));
    let o = ttgt(&["bench", "contract", "--measure", "5", "--only", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--backend cuda only"), "{}", stderr(&o));
    // --quick sets the sizes itself
    let o = ttgt(&["calibrate", "--quick", "--mib", "8", "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--quick"), "{}", stderr(&o));

    let top = ok(&["--help"]);
    assert!(
        top.contains("contract") && top.contains("Examples"),
        "{top}"
    );
    let help = ok(&["contract", "--help"]);
    for w in [
        "--sizes",
        "--dtype",
        "--repeat",
        "--check",
        "--json",
        "--explain",
        "--seed",
        "--alpha",
        "--beta",
        "--c",
        "--output",
        "--threads",
        "1+2j",
        "Fortran",
        "Random mode",
        "File mode",
    ] {
        assert!(help.contains(w), "contract --help lacks {w}");
    }
}

/// `ttgt bench transpose` on a small all-permutations set prints one JSON line per case with
/// the documented keys, then a summary grouped by fused rank.
#[test]
fn bench_transpose_json() {
    let out = ok(&[
        "bench",
        "transpose",
        "--all-perms",
        "3",
        "--extent",
        "5",
        "--threads",
        "1",
        "--repeat",
        "3",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 6 + 1);
    // every record, the summary too, says where and with what it ran
    for record in &lines {
        let p = &record["provenance"];
        assert_eq!(p["ttgt_version"], env!("CARGO_PKG_VERSION"));
        assert!(p["cores"].as_u64().unwrap() >= 1);
        for key in ["cpu_model", "memory_bytes", "commit", "os", "date"] {
            assert!(p.get(key).is_some(), "missing provenance {key} in {record}");
        }
    }
    for case in &lines[..6] {
        assert_eq!(case["samples"], 3);
        let (min, median) = (
            case["seconds"].as_f64().unwrap(),
            case["median_seconds"].as_f64().unwrap(),
        );
        assert!(min > 0.0 && min <= median, "{case}");
        for key in [
            "case",
            "perm",
            "sizes",
            "dtype",
            "seconds",
            "gbps",
            "copy_gbps",
            "ratio",
            "predicted_seconds",
        ] {
            assert!(case.get(key).is_some(), "missing {key} in {case}");
        }
        assert_eq!(case["sizes"], serde_json::json!([5, 5, 5]));
        assert!(case["seconds"].as_f64().unwrap() > 0.0);
    }
    let summary = &lines[6];
    assert_eq!(summary["cases"], 6);
    // identity fuses to rank 1; the others to ranks 2 and 3
    let ranks: Vec<u64> = summary["by_fused_rank"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["fused_rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, vec![1, 2, 3]);
    // a bad option value is a one-line error with status 2
    let bad = ttgt(&["bench", "transpose", "--all-perms", "9"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1);
}

/// A reader that closes the pipe early (`ttgt ... | head -1`) ends the program quietly with
/// status 0, not with an error about the write.
#[test]
fn closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args([
            "bench",
            "transpose",
            "--all-perms",
            "4",
            "--extent",
            "4",
            "--threads",
            "1",
            "--repeat",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // the reader is gone: later lines hit a closed pipe
    let out = child.wait_with_output().unwrap();
    assert!(first.starts_with("ttgt bench transpose"), "{first}");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
}

/// `ttgt calibrate --dry-run` measures and prints a profile without storing it.
#[test]
fn calibrate_dry_run() {
    let out = ok(&[
        "calibrate",
        "--mib",
        "2",
        "--threads",
        "1",
        "--gemm-mflop",
        "100",
        "--dry-run",
    ]);
    let p = ttgt::model::Profile::from_json(&out).unwrap();
    assert!(p.calibrated);
    assert!(p.copy.iter().all(|&g| g > 0.0));
    assert!(p.transpose.tile_stream > 0.0 && p.transpose.rows > 0.0);
    // the store kind of one-line-run tiles and the nest of scattered-line tiles are measured
    assert!(p.line_tile_stream.is_some());
    assert!(p.scatter_regroup.is_some());
    // every operand layout class is fitted for both library crates
    for lib in ttgt::model::GemmLibrary::ALL {
        for layout in ttgt::model::GemmLayout::ALL {
            let n = p
                .gemm
                .iter()
                .filter(|g| g.library == lib && g.layout == layout)
                .count();
            assert_eq!(n, 4, "{lib} {layout}: one entry per element type");
        }
    }
}

/// `ttgt calibrate --gemm-concurrency-only --threads 2 --dry-run` (with short probe rounds,
/// calls of at most 20 MFLOP) measures one concurrent-call factor per element type and
/// operand layout class for the `gemm` crate and keeps the rest; a `--probe-ms` of zero is a
/// usage error.
#[test]
fn calibrate_gemm_concurrency_only() {
    let out = ok(&[
        "calibrate",
        "--gemm-concurrency-only",
        "--threads",
        "2",
        "--probe-ms",
        "0.5",
        "--gemm-mflop",
        "20",
        "--dry-run",
    ]);
    // the probe's grid (24, 96, 384, 2048 on each axis) up to 2·m·n·k = 2e7
    let grid = [24usize, 96, 384, 2048];
    let mut shapes = Vec::new();
    for m in grid {
        for n in grid {
            for k in grid {
                if 2 * m * n * k <= 20_000_000 {
                    shapes.push((m, n, k));
                }
            }
        }
    }
    assert!(shapes.len() > 8 && shapes.len() < 64, "{}", shapes.len());
    let p = ttgt::model::Profile::from_json(&out).unwrap();
    // per layout class: operands from memory for the four element types; from the cache,
    // with C to memory or kept in cache, and from memory with C kept in cache, for f32 and
    // f64
    assert_eq!(p.gemm_concurrent.len(), 40);
    for layout in ttgt::model::GemmLayout::ALL {
        for (operands, count) in [
            (ttgt::model::OperandSource::Memory, 4),
            (ttgt::model::OperandSource::Cache, 2),
            (ttgt::model::OperandSource::Resident, 2),
            (ttgt::model::OperandSource::Streamed, 2),
        ] {
            let n = p
                .gemm_concurrent
                .iter()
                .filter(|c| c.layout == layout && c.operands == operands)
                .count();
            assert_eq!(n, count, "{layout}, {}", operands.name());
        }
    }
    for c in &p.gemm_concurrent {
        assert_eq!((c.library, c.threads), (ttgt::model::GemmLibrary::Gemm, 2));
        assert!((0.5..=4.0).contains(&c.factor), "{c:?}");
        let at: Vec<_> = c.at.iter().map(|s| (s.m, s.n, s.k)).collect();
        assert_eq!(at, shapes, "one factor per probe shape within the cap");
        assert!(c.at.iter().all(|s| (0.5..=4.0).contains(&s.factor)));
    }
    let o = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args(["calibrate", "--gemm-concurrency-only", "--probe-ms", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--probe-ms"), "{}", stderr(&o));
}

/// `ttgt calibrate <args> --dry-run` over a stored profile `stored` (its own file, named by
/// `TTGT_PROFILE`): the printed profile, after checking that the run succeeded and that a dry
/// run left the stored file untouched.
fn calibrate_over(stored: &ttgt::model::Profile, args: &[&str]) -> ttgt::model::Profile {
    static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ttgt-cal-{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("profile.json");
    std::fs::write(&path, stored.to_json()).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .arg("calibrate")
        .args(args)
        .arg("--dry-run")
        .env("TTGT_PROFILE", &path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), stored.to_json());
    let _ = std::fs::remove_dir_all(&dir);
    ttgt::model::Profile::from_json(&stdout(&o)).unwrap()
}

/// `ttgt calibrate --transpose-only --dry-run` re-fits the transposition factors at one
/// thread and at `--threads`, and keeps the stored profile's GEMM model.
#[test]
fn calibrate_transpose_only_keeps_gemm() {
    let mut stored = ttgt::model::Profile::builtin(vec![10.0, 12.0]);
    stored.gemm_concurrent.push(ttgt::model::ConcurrentGemm {
        library: ttgt::model::GemmLibrary::Gemm,
        dtype: ttgt::DType::F64,
        threads: 2,
        layout: ttgt::model::GemmLayout::ALL[1],
        operands: ttgt::model::OperandSource::Cache,
        factor: 1.25,
        at: vec![ttgt::model::ShapeFactor {
            m: 24,
            n: 384,
            k: 24,
            factor: 1.5,
        }],
    });
    let p = calibrate_over(
        &stored,
        &["--transpose-only", "--threads", "2", "--mib", "4"],
    );
    assert!(p.calibrated);
    assert_eq!(p.gemm_concurrent, stored.gemm_concurrent);
    let counts: Vec<usize> = p.transpose_at.iter().map(|(n, _)| *n).collect();
    assert_eq!(counts, [1, 2]);
    assert_eq!(p.transpose_coeffs(2), &p.transpose);
    for (_, c) in &p.transpose_at {
        for f in [
            c.rows,
            c.tile,
            c.tile_stream,
            c.tile_odd,
            c.tile_scatter,
            c.scalar,
        ] {
            // the fit's clamp (`fit_transpose`): streamed kernels may beat the copy probe
            assert!((0.02..=1.8).contains(&f), "{c:?}");
        }
    }
}

/// `ttgt calibrate --gemm-only --dry-run` re-fits the GEMM model for the thread count and
/// keeps the stored profile's copy bandwidth and transposition factors.
#[test]
fn calibrate_gemm_only_keeps_transposition() {
    let stored = ttgt::model::Profile::builtin(vec![10.0, 12.0]);
    assert!(stored.gemm.is_empty());
    let p = calibrate_over(
        &stored,
        &["--gemm-only", "--threads", "1", "--gemm-mflop", "2"],
    );
    assert_eq!(p.copy, stored.copy);
    assert_eq!(p.transpose, stored.transpose);
    assert_eq!(p.transpose_at, stored.transpose_at);
    // every element type, one thread, a positive compute cost
    for dtype in [
        ttgt::DType::F32,
        ttgt::DType::F64,
        ttgt::DType::C32,
        ttgt::DType::C64,
    ] {
        assert!(
            p.gemm
                .iter()
                .any(|g| g.dtype == dtype && g.threads == 1 && g.flop > 0.0),
            "{dtype:?}: {:?}",
            p.gemm
        );
    }
    assert!(p.gemm.iter().all(|g| g.threads == 1));
}

/// `ttgt bench inplace --json` on two tiny explicit cases prints one JSON line per case with
/// the documented keys; a malformed --case is a one-line error with status 2.
#[test]
fn bench_inplace_json() {
    let out = ok(&[
        "bench",
        "inplace",
        "--case",
        "7x5x64",
        "--case",
        "30x31x1",
        "--threads",
        "2",
        "--repeat",
        "1",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2);
    for case in &lines {
        for key in [
            "m",
            "n",
            "chunk",
            "threads",
            "seconds",
            "ns_per_elem",
            "copy_ns_per_elem",
            "scale_ns_per_elem",
            "leader_share",
        ] {
            assert!(case.get(key).is_some(), "missing {key} in {case}");
        }
        assert!(case["seconds"].as_f64().unwrap() > 0.0);
        assert!(case["leader_share"].as_f64().unwrap() >= 0.0);
        assert_eq!(case["threads"], 2);
    }
    assert_eq!(
        (&lines[0]["m"], &lines[0]["n"], &lines[0]["chunk"]),
        (
            &serde_json::json!(7),
            &serde_json::json!(5),
            &serde_json::json!(64)
        )
    );
    let bad = ttgt(&["bench", "inplace", "--case", "7x5"]);
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(stderr(&bad).lines().count(), 1);
}

#[test]
fn bench_transpose_only_takes_a_list_of_names() {
    let out = ok(&[
        "bench",
        "transpose",
        "--all-perms",
        "3",
        "--extent",
        "5",
        "--only",
        "perm-2-1-0, perm-0-2-1",
        "--repeat",
        "1",
        "--json",
    ]);
    let mut names: Vec<String> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter_map(|v| v.get("case").and_then(|c| c.as_str()).map(String::from))
        .collect();
    names.sort();
    assert_eq!(names, ["perm-0-2-1", "perm-2-1-0"], "{out}");
    let none = ttgt(&["bench", "transpose", "--all-perms", "3", "--only", "perm-9"]);
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("no benchmark case selected"));
    // a number names a TTC case, not every name with that digit in it
    let digit = ttgt(&["bench", "transpose", "--all-perms", "3", "--only", "1"]);
    assert_eq!(digit.status.code(), Some(2), "{}", stderr(&digit));
    assert!(stderr(&digit).contains("no benchmark case selected"));
    // forcing a TTLG schema is for the GPU bench only
    let schema = ttgt(&["bench", "transpose", "--all-perms", "3", "--schema", "od"]);
    assert_eq!(schema.status.code(), Some(2), "{}", stderr(&schema));
    assert!(stderr(&schema).contains("--schema applies to --backend cuda only"));
}

/// `--cases qc --all-candidates`: each two-operand call's candidates timed, the regret per
/// call and counted in the workload's summary (no numpy peer: a Python that cannot start).
#[test]
fn bench_qc_regret() {
    let out = ok(&[
        "bench",
        "contract",
        "--cases",
        "qc",
        "--only",
        "qc-1,qc-7",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--all-candidates",
        "--max-candidates",
        "2",
        "--python",
        "/nonexistent/python",
        "--json",
    ]);
    let lines = json_lines(&out);
    let cases: Vec<&serde_json::Value> = lines.iter().filter(|l| l["summary"].is_null()).collect();
    assert_eq!(cases.len(), 2, "{out}");
    let with_regret: Vec<_> = cases.iter().filter(|c| !c["regret"].is_null()).collect();
    for c in &with_regret {
        assert!(c["regret"].as_f64().unwrap() >= 0.0, "{c}");
        let cands = c["candidates"].as_array().unwrap();
        assert_eq!(cands.len(), 2, "{c}");
        assert!(cands.iter().all(|x| x["seconds"].as_f64().unwrap() > 0.0));
    }
    let summary = lines.iter().find(|l| l["summary"] == true).unwrap();
    assert_eq!(
        summary["regret_cases"].as_f64().unwrap() as usize,
        with_regret.len(),
        "{summary}"
    );
}

#[test]
fn bench_contract_json_and_regret() {
    let out = ok(&[
        "bench",
        "contract",
        "--only",
        "1,20,40",
        "--scale",
        "0.15",
        "--dtype",
        "f32",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--all-candidates",
        "--max-candidates",
        "3",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3 + 1, "{out}");
    for case in &lines[..3] {
        for key in [
            "case",
            "spec",
            "dtype",
            "seconds",
            "gflops",
            "gemm_gflops",
            "ratio",
            "transpose_seconds",
            "gemm_seconds",
            "predicted_seconds",
            "plan",
        ] {
            assert!(!case[key].is_null(), "{key} missing in {case}");
        }
        assert!(case["seconds"].as_f64().unwrap() > 0.0);
        assert!(case["regret"].as_f64().unwrap() >= 0.0);
        assert_eq!(case["candidates"].as_array().unwrap().len(), 3);
    }
    assert_eq!(lines[0]["case"], "tccg-1");
    assert_eq!(lines[3]["summary"], true);
    assert_eq!(lines[3]["regret_cases"], 3);
    // bad arguments: one error line, status 2
    for bad in [
        &["bench", "contract", "--scale", "0"][..],
        &["bench", "contract", "--only", "999"],
        &["bench", "contract", "--gemm", "blas"],
        &["bench", "contract", "--threads", "0"],
    ] {
        let o = ttgt(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert_eq!(stderr(&o).lines().count(), 1, "{bad:?}: {}", stderr(&o));
    }
}

#[test]
fn contract_explain_shows_candidates_and_workspace_limit() {
    let out = ok(&[
        "contract",
        "abk,kc->bca",
        "--sizes",
        "a=30,b=20,k=16,c=25",
        "--explain",
        "--check",
        "--workspace",
        "65536",
        "--threads",
        "1",
        "--repeat",
        "1",
    ]);
    assert!(out.contains("runners-up"), "{out}");
    assert!(
        out.contains("workspace limit 65536 bytes excluded"),
        "{out}"
    );
    assert!(out.contains("check: ok"), "{out}");
    let out = ok(&[
        "contract",
        "ij,jk->ik",
        "--sizes",
        "i=30,j=30,k=40",
        "--explain",
        "--gemm",
        "matrixmultiply",
        "--measure",
        "5",
    ]);
    assert!(out.contains("[matrixmultiply]"), "{out}");
}

#[test]
fn bench_networks_json() {
    let out = ok(&[
        "bench",
        "networks",
        "--only",
        "ao2mo,bilinear",
        "--scale",
        "0.2",
        "--dtype",
        "c32",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ]);
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 2 + 1, "{out}");
    for case in &lines[..2] {
        for key in [
            "seconds",
            "gflops",
            "flops",
            "predicted_seconds",
            "planning_seconds",
            "flop_path_seconds",
            "flop_path_flops",
            "flop_path_predicted_seconds",
            "flop_path_speedup",
            "ratio",
        ] {
            let v = case[key].as_f64();
            assert!(v.is_some_and(|x| x > 0.0), "{key} in {case}");
        }
        assert!(
            case["flop_path_flops"].as_f64() <= case["flops"].as_f64(),
            "{case}"
        );
        assert!(
            case["predicted_seconds"].as_f64().unwrap_or(f64::INFINITY)
                <= case["flop_path_predicted_seconds"].as_f64().unwrap_or(0.0) * (1.0 + 1e-9),
            "{case}"
        );
        assert_eq!(case["dtype"], "c32");
        assert!(
            case["steps"].as_array().is_some_and(|s| s.len() >= 2),
            "{case}"
        );
    }
    assert_eq!(lines[0]["case"], "ao2mo");
    assert!(lines[0]["path_strategy"]
        .as_str()
        .is_some_and(|s| s.starts_with("predicted time")));
    assert_eq!(lines[2]["summary"], true);
    assert!(lines[2]["geomean_flop_path_speedup"]
        .as_f64()
        .is_some_and(|x| x > 0.0));
    assert!(lines[2]["mean_prediction_error"]
        .as_f64()
        .is_some_and(|x| x >= 0.0));
    let o = ttgt(&["bench", "networks", "--only", "nosuch"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no network selected"));
}

/// Without a stored profile, a contraction below `PROBE_MIN_BYTES` is planned with the
/// provisional profile (no copy probe has run when its plan is explained); one above it
/// probes first, and one of any size uses a stored profile.
#[test]
fn small_problems_plan_without_the_copy_probe() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("no-profile.json");
    let run = |profile: &Path, sizes: &str| {
        let o = Command::new(env!("CARGO_BIN_EXE_ttgt"))
            .args(["contract", "ij,jk->ik", "--sizes", sizes, "--repeat", "1"])
            .arg("--explain")
            .env("TTGT_PROFILE", profile)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        stdout(&o).contains("copy rates: provisional")
    };
    // 3 x 32 KiB of f64, and 3 x 2 MiB (6 MiB in all)
    assert!(run(&missing, "i=64,j=64,k=64"));
    assert!(!run(&missing, "i=512,j=512,k=512"));
    let stored = dir.path().join("profile.json");
    std::fs::write(
        &stored,
        ttgt::model::Profile::builtin(vec![10.0, 12.0]).to_json(),
    )
    .unwrap();
    assert!(!run(&stored, "i=64,j=64,k=64"));
}

/// A spec that starts with '-' (`->`, a scalar to a scalar) is a spec, not an option; and
/// a named index of extent 1 broadcasts against a larger one, as in numpy.
#[test]
fn hyphen_specs_and_broadcast_letters() {
    let f = Files::new();
    let x = f.put("x.npy", &ArrayD::from_elem(IxDyn(&[]), 2.5f64));
    let out = s(&f.path("o.npy"));
    ok(&["contract", "->", &x, "-o", &out]);
    assert_eq!(read::<f64>(&out)[IxDyn(&[])], 2.5);
    let a = values::<f64>(&[1, 2, 3], 1);
    let b = values::<f64>(&[4, 3, 2], 2);
    let (pa, pb) = (f.put("a.npy", &a), f.put("b.npy", &b));
    ok(&["contract", "bij,bjk->bik", &pa, &pb, "-o", &out]);
    let a0 = a.index_axis(ndarray::Axis(0), 0);
    let want = ArrayD::from_shape_fn(IxDyn(&[4, 2, 2]), |ix| {
        (0..3)
            .map(|j| a0[[ix[1], j]] * b[[ix[0], j, ix[2]]])
            .sum::<f64>()
    });
    assert_close(&read::<f64>(&out), &want, 1e-12);
    let e = ttgt(&["contract", "bij,bjk->bik", &pb, &pb]);
    assert_eq!(e.status.code(), Some(2));
    let msg = "index 'j' has extent 2 in operand 0 (axis 2) but 3 in operand 1 (axis 1)";
    assert!(stderr(&e).contains(msg), "{}", stderr(&e));
}

/// `--explain` with `--measure` says that measurement chose the plan and where the prediction
/// ranked it; without `--measure`, that it is the best predicted.
#[test]
fn explain_says_how_the_plan_was_chosen() {
    let sizes = "a=24,b=8,c=24,d=24";
    let measured = ok(&[
        "contract",
        "abc,cbd->ad",
        "--sizes",
        sizes,
        "--measure",
        "20",
        "--explain",
        "--repeat",
        "1",
    ]);
    let head = measured.lines().nth(1).unwrap_or_default();
    assert!(
        head.contains("chosen (fastest measured, ") && head.contains(" by prediction)"),
        "{measured}"
    );
    let modelled = ok(&[
        "contract",
        "abc,cbd->ad",
        "--sizes",
        sizes,
        "--explain",
        "--repeat",
        "1",
    ]);
    assert!(
        modelled
            .lines()
            .nth(1)
            .unwrap_or_default()
            .contains(", best predicted): "),
        "{modelled}"
    );
}

/// `--plot` draws the run as an SVG figure, and `ttgt report DIR` gathers JSON records into
/// one HTML page with a figure and the provenance of each group.
#[test]
fn plots_and_report() {
    let dir = Files::new();
    let svg = dir.path("perms.svg");
    let out = ok(&[
        "bench",
        "transpose",
        "--all-perms",
        "3",
        "--extent",
        "6",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
        "--plot",
        &s(&svg),
    ]);
    let figure = std::fs::read_to_string(&svg).unwrap();
    assert!(
        figure.starts_with("<svg") && figure.contains("bandwidth / best copy"),
        "{figure}"
    );
    assert!(
        figure.contains("transpositions: 6 cases, f32, 1 thread(s)"),
        "{figure}"
    );
    std::fs::write(dir.path("perms.jsonl"), &out).unwrap();
    let contract = ok(&[
        "bench",
        "contract",
        "--only",
        "1",
        "--scale",
        "0.1",
        "--threads",
        "1",
        "--repeat",
        "1",
        "--json",
    ]);
    std::fs::write(dir.path("tccg.json"), &contract).unwrap();
    std::fs::write(dir.path("notes.txt"), "not a record").unwrap();
    let page = dir.path("report.html");
    let said = ok(&["report", &s(&dir.path("")), "-o", &s(&page)]);
    assert!(said.contains("9 record(s)"), "{said}"); // 6 cases + summary, 1 case + summary
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    assert_eq!(html.matches("<svg").count(), 2, "{html}");
    assert!(
        html.contains("<h2>transpositions (f32, 1 thread(s))</h2>"),
        "{html}"
    );
    assert!(
        html.contains("<h2>contractions (f64, 1 thread(s))</h2>"),
        "{html}"
    );
    assert!(html.contains(env!("CARGO_PKG_VERSION")));
    // a line that is not JSON names its file and line
    std::fs::write(dir.path("bad.jsonl"), "{\"case\": 1}\nnot json\n").unwrap();
    let bad = ttgt(&["report", &s(&dir.path("")), "-o", &s(&page)]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("bad.jsonl:2"), "{}", stderr(&bad));
}
