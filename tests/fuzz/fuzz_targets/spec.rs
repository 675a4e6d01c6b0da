//! The einsum parser and binder on arbitrary specs: `parse` never panics, a parsed spec prints
//! as text that parses to the same terms, binding it to shapes made from the input gives
//! extents or an error, and a bound spec has a contraction path.
//!
//! Input: two bytes of shape choices, then the spec's text.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (choice, text) = data.split_at(2);
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    let Ok(spec) = ttgt::einsum::parse(text) else {
        return;
    };
    let again = ttgt::einsum::parse(&spec.to_string()).expect("a parsed spec's text parses");
    // The same terms (their positions in the text differ).
    let terms = |s: &ttgt::einsum::Spec| {
        let all = s.inputs().iter().chain([s.output()]);
        all.map(|t| (t.letters().to_vec(), t.ellipsis()))
            .collect::<Vec<_>>()
    };
    assert_eq!(terms(&again), terms(&spec), "{text:?} printed as {spec}");
    if spec.inputs().is_empty() || spec.inputs().len() > 4 {
        return;
    }
    let Some(shapes) = common::shapes_for(&spec, [choice[0], choice[1]]) else {
        return;
    };
    let refs: Vec<&[usize]> = shapes.iter().map(|s| s.as_slice()).collect();
    let Ok(bound) = spec.bind(&refs) else {
        return;
    };
    for (k, labels) in bound.inputs().iter().enumerate() {
        let dims: Vec<usize> = labels.iter().map(|&l| bound.extent(l)).collect();
        assert_eq!(
            dims.len(),
            shapes[k].len(),
            "{text:?} on {shapes:?}: operand {k}'s rank"
        );
    }
    let path = ttgt::einsum_path(text, &refs, &ttgt::PathOptions::default())
        .expect("a bound spec has a path");
    assert!(
        path.flops().is_finite() && path.flops() >= 0.0,
        "{text:?} on {shapes:?}: {path}"
    );
});
