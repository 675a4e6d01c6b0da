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

/// Whether numpy is there; without it, says the test skipped (a failure under
/// `TTGT_REQUIRE_NUMPY=1`).
fn numpy_or_skip() -> bool {
    if numpy_available() {
        return true;
    }
    let required = std::env::var("TTGT_REQUIRE_NUMPY").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "TTGT_REQUIRE_NUMPY=1 but `python3 -c \"import numpy\"` fails"
    );
    println!("SKIPPED: numpy not available");
    false
}

#[test]
fn matches_numpy_einsum() {
    if !numpy_or_skip() {
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

/// `bench contract --cases qc` beside numpy on two threads: the rounds that pause for numpy's
/// spinning workers and run an untimed batch before each timed one report every timed batch
/// and numpy's time of the same call.
#[test]
fn qc_bench_beside_numpy_on_two_threads() {
    if !numpy_or_skip() {
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_ttgt"))
        .args([
            "bench",
            "contract",
            "--cases",
            "qc",
            "--only",
            "qc-1",
            "--threads",
            "2",
            "--repeat",
            "2",
            "--python",
            "python3",
            "--json",
        ])
        .output()
        .expect("ttgt runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let case: serde_json::Value = stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON line"))
        .find(|v| v["case"] == "qc-1")
        .expect("a record of qc-1");
    assert_eq!(case["threads"], 2, "{case}");
    assert_eq!(case["samples"], 2, "{case}");
    assert!(case["seconds"].as_f64().unwrap() > 0.0, "{case}");
    assert!(case["numpy"]["seconds"].as_f64().unwrap() > 0.0, "{case}");
    assert!(
        case["numpy"]["way"].as_str().unwrap().contains("einsum"),
        "{case}"
    );
}
