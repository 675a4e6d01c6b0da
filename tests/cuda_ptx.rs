//! The PTX shipped in `kernels/ptx/` (generated ahead by `.ci/cuda.sh`, embedded by the
//! `cuda` feature) defines every kernel the planner can name, with the parameter list the
//! launchers pass.

use std::path::Path;

use ttgt::backend::cuda::kernels::{all_kernels, check_signatures, ptx_entries, KernelFile};

fn ptx(file: KernelFile) -> String {
    let file = file.source().replace(".cu", ".ptx");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("kernels/ptx")
        .join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn ptx_entries_match_the_launcher() {
    let mut n = 0;
    for f in KernelFile::ALL {
        let text = ptx(f);
        check_signatures(f, &text).unwrap();
        n += ptx_entries(&text).unwrap().len();
        let target = format!(".target {}", f.target());
        assert!(text.contains(&target), "{f:?}: PTX not for {}", f.target());
    }
    assert_eq!(n, all_kernels().len());
}

#[test]
fn a_wrong_parameter_list_is_reported() {
    let text = ptx(KernelFile::Od);
    // Pretend the f32 kernels took a double alpha.
    let broken = text.replacen(
        ".param .f32 ttgt_od_f32_i32_r2_param_3",
        ".param .f64 ttgt_od_f32_i32_r2_param_3",
        1,
    );
    assert_ne!(broken, text);
    let e = check_signatures(KernelFile::Od, &broken).unwrap_err();
    assert!(e.to_string().contains("ttgt_od_f32_i32_r2"), "{e}");
}
