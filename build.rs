//! Build script. Records the git commit the crate is built from (`TTGT_GIT_COMMIT`, for the
//! provenance of benchmark records; "unknown" outside a git checkout). With feature
//! `cuda-emu`: compiles the CUDA kernels of `kernels/` as C++ together with the CPU emulator
//! (`kernels/emu/`), for tests that run the GPU kernels without a GPU. The default build
//! needs no C++ compiler.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    git_commit();
    #[cfg(feature = "cuda-emu")]
    emu::build();
}

/// `TTGT_GIT_COMMIT`: the checked-out commit (edits not yet committed are not marked);
/// rerun when HEAD or the current branch moves.
fn git_commit() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            println!("cargo:rerun-if-changed={dir}/{r}");
        }
    }
    println!("cargo:rustc-env=TTGT_GIT_COMMIT={commit}");
}

#[cfg(feature = "cuda-emu")]
mod emu {
    use std::path::PathBuf;

    const KERNELS: [&str; 5] = ["ttlg_od", "ttlg_oa", "ttlg_fl", "ttlg_fs", "ttlg_oda"];

    pub fn build() {
        let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
        let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
        let kdir = root.join("kernels");
        for f in [
            "ttgt_common.cuh",
            "ttlg_od_tile.cuh",
            "emu/cuda_emu.h",
            "emu/cuda_emu.cpp",
        ] {
            println!("cargo:rerun-if-changed={}", kdir.join(f).display());
        }
        let mut b = cc::Build::new();
        b.cpp(true)
            .std("c++17")
            .define("TTGT_EMU", None)
            .include(&kdir)
            .flag_if_supported("-Wno-unused-parameter")
            .flag_if_supported("-Wno-unknown-pragmas")
            // 32-byte vectors (2x2 blocks of f64) passed between the emulator's inline
            // functions: GCC notes the AVX calling convention, which nothing outside uses.
            .flag_if_supported("-Wno-psabi")
            .file(kdir.join("emu/cuda_emu.cpp"));
        for k in KERNELS {
            let cu = kdir.join(format!("{k}.cu"));
            println!("cargo:rerun-if-changed={}", cu.display());
            // The .cu sources are included from .cpp wrappers so that the C++ compiler
            // treats them as C++.
            let wrapper = out.join(format!("emu_{k}.cpp"));
            let text = format!("#include \"{}\"\n", cu.display());
            if std::fs::read_to_string(&wrapper).ok().as_deref() != Some(text.as_str()) {
                if let Err(e) = std::fs::write(&wrapper, text) {
                    panic!("writing {}: {e}", wrapper.display());
                }
            }
            b.file(wrapper);
        }
        b.compile("ttgt_cuda_emu");
    }
}
