//! Runs `tests/numpy_compare.py`, which compares `ttgt contract` with `numpy.einsum` on random
//! specs. Skipped (passing) when python3 or numpy is missing, unless `TTGT_REQUIRE_NUMPY=1`.

use std::process::Command;

fn numpy_available() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn matches_numpy_einsum() {
    if !numpy_available() {
        let required = std::env::var("TTGT_REQUIRE_NUMPY").is_ok_and(|v| v == "1");
        assert!(
            !required,
            "TTGT_REQUIRE_NUMPY=1 but `python3 -c \"import numpy\"` fails"
        );
        println!("SKIPPED: numpy not available");
        return;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/numpy_compare.py");
    let out = Command::new("python3")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_ttgt"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "numpy comparison failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}
