//! `--backend cuda` on a machine without a usable GPU (or a build without the `cuda`
//! feature): one error line, exit status 2. Skipped when a device is present.

use std::process::Command;

fn ttgt(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cuda_backend_without_gpu_is_a_clear_error() {
    for args in [
        &["bench", "transpose", "--backend", "cuda", "--only", "3"][..],
        &["bench", "contract", "--backend", "cuda", "--only", "1"],
        &[
            "bench",
            "contract",
            "--backend",
            "cuda",
            "--only",
            "2",
            "--measure",
            "5",
        ],
        &[
            "bench",
            "transpose",
            "--backend",
            "cuda",
            "--only",
            "1",
            "--measure",
            "5",
        ],
        &["calibrate", "--backend", "cuda", "--dry-run"],
        &[
            "bench",
            "transpose",
            "--backend",
            "cuda",
            "--all-perms",
            "3",
            "--schema",
            "oa",
        ],
        &[
            "bench",
            "transpose",
            "--backend",
            "cuda",
            "--micro-blocks",
            "all",
        ],
    ] {
        let (code, err) = ttgt(args);
        if code == 0 {
            println!("SKIPPED: a CUDA device is present ({args:?} ran)");
            continue;
        }
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.starts_with("ttgt: error: --backend cuda: "),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    let (code, err) = ttgt(&["bench", "transpose", "--backend", "tpu"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown backend \"tpu\""), "{err}");
    let (code, err) = ttgt(&["bench", "transpose", "--micro-blocks", "f32", "--only", "3"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--micro-blocks and --async-copies apply to --backend cuda only"),
        "{err}"
    );
}
