//! The kernels of `kernels/*.cu`: names, the parameter lists the launchers pass, and a
//! parser of PTX entry signatures to check the two against each other.
//!
//! Every kernel takes `(const T* a, T* b, const I* meta, T alpha, T beta, int mode)`.

use crate::error::{Error, Result};
use crate::tensor::DType;

use super::ttlg::Schema;

/// One kernel parameter as the launcher passes it.
///
/// ```
/// use ttgt::backend::cuda::kernels::Param;
/// assert_eq!(Param::Scalar(ttgt::DType::C64).size(), 16);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// A device pointer (8 bytes).
    Ptr,
    /// A scalar of an element type, by value.
    Scalar(DType),
    /// A 32-bit integer.
    I32,
}

impl Param {
    /// Size in bytes.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::kernels::Param::Ptr.size(), 8);
    /// ```
    pub fn size(self) -> usize {
        match self {
            Param::Ptr => 8,
            Param::Scalar(d) => d.size_bytes(),
            Param::I32 => 4,
        }
    }
}

/// The parameters the launcher passes to a kernel of element type `dtype`.
///
/// ```
/// use ttgt::backend::cuda::kernels::{params, Param};
/// assert_eq!(params(ttgt::DType::F32)[3], Param::Scalar(ttgt::DType::F32));
/// ```
pub fn params(dtype: DType) -> [Param; 6] {
    [
        Param::Ptr,
        Param::Ptr,
        Param::Ptr,
        Param::Scalar(dtype),
        Param::Scalar(dtype),
        Param::I32,
    ]
}

/// One PTX module: a `.cu` file of `kernels/` and the kernels it defines.
///
/// ```
/// use ttgt::backend::cuda::{kernels::KernelFile, ttlg::Schema};
/// assert_eq!(KernelFile::of_schema(Schema::FviMatchSmall).source(), "ttlg_fs.cu");
/// assert_eq!(KernelFile::of_kernel("ttgt_oda_f64_i32_r4"), Some(KernelFile::OdAsync));
/// assert_eq!(KernelFile::of_kernel("ttgt_od_f64_i32_r4"), Some(KernelFile::Od));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelFile {
    /// Orthogonal-Distinct, loads staged in registers (sm_70).
    Od,
    /// Orthogonal-Arbitrary (sm_70).
    Oa,
    /// FVI-Match-Large (sm_70).
    Fl,
    /// FVI-Match-Small (sm_70).
    Fs,
    /// Orthogonal-Distinct with asynchronous global-to-shared copies (cp.async, sm_80).
    OdAsync,
}

impl KernelFile {
    /// All five, in a fixed order.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::kernels::KernelFile::ALL.len(), 5);
    /// ```
    pub const ALL: [KernelFile; 5] = [
        KernelFile::Od,
        KernelFile::Oa,
        KernelFile::Fl,
        KernelFile::Fs,
        KernelFile::OdAsync,
    ];

    /// The register-staged file of a schema.
    ///
    /// ```
    /// use ttgt::backend::cuda::{kernels::KernelFile, ttlg::Schema};
    /// assert_eq!(KernelFile::of_schema(Schema::OrthogonalArbitrary), KernelFile::Oa);
    /// ```
    pub fn of_schema(schema: Schema) -> Self {
        match schema {
            Schema::OrthogonalDistinct => KernelFile::Od,
            Schema::OrthogonalArbitrary => KernelFile::Oa,
            Schema::FviMatchLarge => KernelFile::Fl,
            Schema::FviMatchSmall => KernelFile::Fs,
        }
    }

    /// The file defining kernel `name`, from its prefix (`ttgt_<od|oa|fl|fs|oda>_`).
    ///
    /// ```
    /// use ttgt::backend::cuda::kernels::KernelFile;
    /// assert_eq!(KernelFile::of_kernel("ttgt_fl_c64_i64_r8"), Some(KernelFile::Fl));
    /// assert_eq!(KernelFile::of_kernel("memcpy"), None);
    /// ```
    pub fn of_kernel(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| name.starts_with(f.prefix()))
    }

    /// The name of the kernels' family in kernel names (`od`, ..., `oda`).
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::kernels::KernelFile::OdAsync.family(), "oda");
    /// ```
    pub fn family(self) -> &'static str {
        match self {
            KernelFile::Od => "od",
            KernelFile::Oa => "oa",
            KernelFile::Fl => "fl",
            KernelFile::Fs => "fs",
            KernelFile::OdAsync => "oda",
        }
    }

    /// The prefix of its kernels' names (`ttgt_od_`, ...).
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::kernels::KernelFile::Oa.prefix(), "ttgt_oa_");
    /// ```
    pub fn prefix(self) -> &'static str {
        match self {
            KernelFile::Od => "ttgt_od_",
            KernelFile::Oa => "ttgt_oa_",
            KernelFile::Fl => "ttgt_fl_",
            KernelFile::Fs => "ttgt_fs_",
            KernelFile::OdAsync => "ttgt_oda_",
        }
    }

    /// The `.cu` file under `kernels/`.
    ///
    /// ```
    /// assert_eq!(ttgt::backend::cuda::kernels::KernelFile::OdAsync.source(), "ttlg_oda.cu");
    /// ```
    pub fn source(self) -> &'static str {
        match self {
            KernelFile::Od => "ttlg_od.cu",
            KernelFile::Oa => "ttlg_oa.cu",
            KernelFile::Fl => "ttlg_fl.cu",
            KernelFile::Fs => "ttlg_fs.cu",
            KernelFile::OdAsync => "ttlg_oda.cu",
        }
    }

    /// The PTX target the file is compiled for (the oldest GPU that can load it).
    ///
    /// ```
    /// use ttgt::backend::cuda::kernels::KernelFile;
    /// assert_eq!((KernelFile::Od.target(), KernelFile::OdAsync.target()), ("sm_70", "sm_80"));
    /// ```
    pub fn target(self) -> &'static str {
        match self {
            KernelFile::OdAsync => "sm_80",
            _ => "sm_70",
        }
    }

    /// Element type names its kernels are instantiated for.
    fn types(self) -> &'static [(&'static str, DType)] {
        const PLAIN: [(&str, DType); 4] = [
            ("f32", DType::F32),
            ("f64", DType::F64),
            ("c32", DType::C32),
            ("c64", DType::C64),
        ];
        const BLOCKS: [(&str, DType); 6] = [
            PLAIN[0],
            PLAIN[1],
            PLAIN[2],
            PLAIN[3],
            ("q32", DType::F32),
            ("q64", DType::F64),
        ];
        match self {
            KernelFile::Od | KernelFile::Oa => &BLOCKS,
            KernelFile::Fl | KernelFile::Fs => &PLAIN,
            // cp.async copies 4, 8 or 16 bytes: no 32-byte blocks of f64.
            KernelFile::OdAsync => &BLOCKS[..5],
        }
    }
}

/// Every kernel name with the scalar type of its parameters, in the order the sources
/// instantiate them: four schemas in four types, OD and OA also for 2x2 blocks of f32 and
/// of f64 (`q32`, `q64`: f32 and f64 parameters), and the asynchronous-copy OD kernels
/// (`oda`) in the four types and `q32`.
///
/// ```
/// let all = ttgt::backend::cuda::kernels::all_kernels();
/// assert_eq!(all.len(), (2 * 6 + 2 * 4 + 5) * 2 * 3);
/// assert!(all.iter().any(|(n, _)| n == "ttgt_od_c64_i64_r8"));
/// assert!(all.iter().any(|(n, d)| n == "ttgt_oa_q32_i32_r4" && *d == ttgt::DType::F32));
/// assert!(all.iter().any(|(n, _)| n == "ttgt_oda_q32_i32_r2"));
/// ```
pub fn all_kernels() -> Vec<(String, DType)> {
    let mut v = Vec::new();
    for f in KernelFile::ALL {
        for &(tn, d) in f.types() {
            for i in ["i32", "i64"] {
                for r in [2, 4, 8] {
                    v.push((format!("{}{}_{}_r{}", f.prefix(), tn, i, r), d));
                }
            }
        }
    }
    v
}

/// A parameter of a PTX `.entry`: its type (`u64`, `f32`, `b8`...), alignment and bytes.
///
/// ```
/// let e = ttgt::backend::cuda::kernels::ptx_entries(".entry k(.param .f64 x)").unwrap();
/// assert_eq!(e[0].1[0].size, 8);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// PTX type name without the dot.
    pub ty: String,
    /// Bytes.
    pub size: usize,
    /// Alignment (bytes).
    pub align: usize,
}

/// The `.entry` signatures of a PTX module.
///
/// ```
/// let ptx = ".visible .entry k(\n .param .u64 k_param_0,\n .param .align 8 .b8 k_param_1[8],\n .param .u32 k_param_2\n)\n{ }";
/// let e = ttgt::backend::cuda::kernels::ptx_entries(ptx).unwrap();
/// assert_eq!(e[0].0, "k");
/// assert_eq!(e[0].1.iter().map(|p| p.size).collect::<Vec<_>>(), vec![8, 8, 4]);
/// ```
pub fn ptx_entries(ptx: &str) -> Result<Vec<(String, Vec<PtxParam>)>> {
    let bad = |w: String| Error::Unsupported(format!("PTX: {w}"));
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry ") {
        let after = &rest[at + 7..];
        let open = after
            .find('(')
            .ok_or_else(|| bad("entry without '('".into()))?;
        let close = after
            .find(')')
            .ok_or_else(|| bad("entry without ')'".into()))?;
        let name = after[..open].trim().to_string();
        let mut params = Vec::new();
        for p in after[open + 1..close].split(',') {
            let toks: Vec<&str> = p.split_whitespace().collect();
            if toks.is_empty() {
                continue;
            }
            if toks.first() != Some(&".param") {
                return Err(bad(format!("{name}: parameter {p:?}")));
            }
            let mut align = 0;
            let mut i = 1;
            if toks.get(1) == Some(&".align") {
                align = toks
                    .get(2)
                    .and_then(|a| a.parse().ok())
                    .ok_or_else(|| bad(format!("{name}: alignment in {p:?}")))?;
                i = 3;
            }
            let ty = toks
                .get(i)
                .map(|t| t.trim_start_matches('.').to_string())
                .ok_or_else(|| bad(format!("{name}: type in {p:?}")))?;
            let pname = toks.get(i + 1).copied().unwrap_or("");
            let elem: usize = ty[1..]
                .parse::<usize>()
                .map_err(|_| bad(format!("{name}: type {ty}")))?
                / 8;
            let count = match (pname.find('['), pname.find(']')) {
                (Some(l), Some(r)) => pname[l + 1..r]
                    .parse::<usize>()
                    .map_err(|_| bad(format!("{name}: array size in {p:?}")))?,
                _ => 1,
            };
            params.push(PtxParam {
                ty,
                size: elem * count,
                align: if align == 0 { elem } else { align },
            });
        }
        out.push((name, params));
        rest = &after[close..];
    }
    Ok(out)
}

/// Whether a PTX parameter is what the launcher passes for `p`.
///
/// ```
/// use ttgt::backend::cuda::kernels::{param_matches, ptx_entries, Param};
/// let e = ptx_entries(".entry k(.param .u64 p)").unwrap();
/// assert!(param_matches(Param::Ptr, &e[0].1[0]));
/// ```
pub fn param_matches(p: Param, x: &PtxParam) -> bool {
    match p {
        Param::Ptr => x.ty == "u64" && x.size == 8,
        Param::I32 => (x.ty == "u32" || x.ty == "s32" || x.ty == "b32") && x.size == 4,
        Param::Scalar(DType::F32) => x.ty == "f32",
        Param::Scalar(DType::F64) => x.ty == "f64",
        Param::Scalar(d) => x.ty == "b8" && x.size == d.size_bytes() && x.align == d.size_bytes(),
    }
}

/// Checks that `ptx` defines every kernel of `file` with the launcher's parameter list.
///
/// ```no_run
/// use ttgt::backend::cuda::kernels::{self, KernelFile};
/// let ptx = std::fs::read_to_string("kernels/ptx/ttlg_od.ptx").unwrap();
/// kernels::check_signatures(KernelFile::Od, &ptx).unwrap();
/// ```
pub fn check_signatures(file: KernelFile, ptx: &str) -> Result<()> {
    let entries = ptx_entries(ptx)?;
    let want: Vec<(String, DType)> = all_kernels()
        .into_iter()
        .filter(|(n, _)| KernelFile::of_kernel(n) == Some(file))
        .collect();
    for (name, dtype) in &want {
        let (_, got) = entries
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| Error::Unsupported(format!("PTX has no entry {name}")))?;
        let expect = params(*dtype);
        if got.len() != expect.len() || !expect.iter().zip(got).all(|(p, x)| param_matches(*p, x)) {
            return Err(Error::Unsupported(format!(
                "PTX entry {name} takes {got:?}; the launcher passes {expect:?}"
            )));
        }
    }
    if entries.len() != want.len() {
        return Err(Error::Unsupported(format!(
            "PTX of {} has {} entries, expected {}",
            file.source(),
            entries.len(),
            want.len()
        )));
    }
    Ok(())
}

/// The embedded PTX of a kernel file (generated ahead by `.ci/cuda.sh`, see docs/CUDA.md).
///
/// ```
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::kernels::{ptx, KernelFile};
/// assert!(ptx(KernelFile::Od).contains(".entry ttgt_od_f32_i32_r2"));
/// # }
/// ```
#[cfg(feature = "cuda")]
pub fn ptx(file: KernelFile) -> &'static str {
    match file {
        KernelFile::Od => include_str!("../../../kernels/ptx/ttlg_od.ptx"),
        KernelFile::Oa => include_str!("../../../kernels/ptx/ttlg_oa.ptx"),
        KernelFile::Fl => include_str!("../../../kernels/ptx/ttlg_fl.ptx"),
        KernelFile::Fs => include_str!("../../../kernels/ptx/ttlg_fs.ptx"),
        KernelFile::OdAsync => include_str!("../../../kernels/ptx/ttlg_oda.ptx"),
    }
}

/// Environment variable naming a directory of PTX files (`ttlg_od.ptx`, ...) that replace the
/// embedded ones: for trying kernel variants on a GPU machine without rebuilding the crate.
pub const PTX_DIR_ENV: &str = "TTGT_PTX_DIR";

/// The PTX a device loads for `file`: that file in `$TTGT_PTX_DIR` when the variable is set
/// (its entries are checked against the launcher's parameter lists), else the embedded PTX.
///
/// ```
/// # #[cfg(feature = "cuda")] {
/// use ttgt::backend::cuda::kernels::{ptx_source, KernelFile};
/// std::env::remove_var("TTGT_PTX_DIR");
/// assert!(ptx_source(KernelFile::Fl).unwrap().contains(".entry ttgt_fl_f32_i32_r2"));
/// # }
/// ```
#[cfg(feature = "cuda")]
pub fn ptx_source(file: KernelFile) -> Result<std::borrow::Cow<'static, str>> {
    let Some(dir) = std::env::var_os(PTX_DIR_ENV) else {
        return Ok(std::borrow::Cow::Borrowed(ptx(file)));
    };
    let name = file.source().replace(".cu", ".ptx");
    let path = std::path::Path::new(&dir).join(&name);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Error::Gpu(format!(
            "{PTX_DIR_ENV}: cannot read {}: {e}",
            path.display()
        ))
    })?;
    check_signatures(file, &text)?;
    Ok(std::borrow::Cow::Owned(text))
}
