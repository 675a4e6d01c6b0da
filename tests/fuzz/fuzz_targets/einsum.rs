//! `ttgt::einsum` on arbitrary specs and small operands shaped from the input (broadcast
//! dims, mismatched extents): it agrees with the reference loops or fails where they fail.
//!
//! Input: two bytes of shape choices, then the spec's text.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use ndarray::{ArrayD, IxDyn};

fuzz_target!(|data: &[u8]| {
    let Some((choice, text)) = data.split_first_chunk::<2>() else {
        return;
    };
    let (Ok(text), choice) = (std::str::from_utf8(text), *choice) else {
        return;
    };
    let Ok(spec) = ttgt::einsum::parse(text) else {
        return;
    };
    if spec.inputs().is_empty() || spec.inputs().len() > 4 {
        return;
    }
    let Some(shapes) = common::shapes_for(&spec, choice) else {
        return;
    };
    let arrays: Vec<ArrayD<f64>> = shapes
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let n: usize = s.iter().product();
            let v = (0..n).map(|i| ((i * 7 + k * 3) % 5) as f64 - 2.0).collect();
            ArrayD::from_shape_vec(IxDyn(s), v).expect("shape and data agree")
        })
        .collect();
    let views: Vec<_> = arrays.iter().map(|a| a.view()).collect();
    let want = ttgt::reference::einsum(text, &views);
    let got = ttgt::einsum(text, &views);
    match (want, got) {
        (Ok(w), Ok(g)) => {
            assert_eq!(w.shape(), g.shape(), "{text:?} on {shapes:?}");
            for (x, y) in w.iter().zip(g.iter()) {
                assert!(
                    (x - y).abs() <= 1e-9 * (1.0 + x.abs()),
                    "{text:?} on {shapes:?}: {x} != {y}"
                );
            }
        }
        (Err(_), Err(_)) => {}
        (w, g) => panic!(
            "{text:?} on {shapes:?}: reference {:?}, ttgt {:?}",
            w.map(|a| a.len()),
            g.map(|a| a.len())
        ),
    }
});
