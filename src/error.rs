//! The crate's error type. Every message names what is wrong and where: the index, the
//! operand (counted from 0) and, for spec strings, the character position (counted from 0).

use thiserror::Error;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in ttgt. No public function panics on user input; it returns
/// one of these.
///
/// ```
/// let a = ndarray::Array2::<f64>::zeros((2, 3));
/// let b = ndarray::Array2::<f64>::zeros((4, 5));
/// let err = ttgt::contract("ij,jk->ik", &a, &b).unwrap_err();
/// assert_eq!(
///     err.to_string(),
///     "index 'j' has extent 3 in operand 0 (axis 1) but 4 in operand 1 (axis 0)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// A character that is not a letter, `,`, `->`, `...` or a space.
    #[error("invalid character {ch:?} at position {pos} of spec {spec:?}: subscripts are letters a-z and A-Z")]
    InvalidCharacter {
        /// The spec string.
        spec: String,
        /// The offending character.
        ch: char,
        /// Its position (in characters, from 0).
        pos: usize,
    },
    /// Misplaced `-`, `>`, `.` or `,`, or a second `->` or `...`.
    #[error("malformed spec {spec:?} at position {pos}: {reason}")]
    Malformed {
        /// The spec string.
        spec: String,
        /// Position of the problem (in characters, from 0).
        pos: usize,
        /// What is wrong.
        reason: String,
    },
    /// The same index twice in the output.
    #[error("index '{label}' appears twice in the output of spec {spec:?} (positions {first} and {pos})")]
    RepeatedOutputIndex {
        /// The spec string.
        spec: String,
        /// The repeated index.
        label: char,
        /// Position of its first occurrence.
        first: usize,
        /// Position of the repetition.
        pos: usize,
    },
    /// An output index that no input has.
    #[error("output index '{label}' at position {pos} of spec {spec:?} appears in no input")]
    UnknownOutputIndex {
        /// The spec string.
        spec: String,
        /// The index.
        label: char,
        /// Its position in the spec.
        pos: usize,
    },
    /// The inputs have broadcast (`...`) dimensions but the explicit output has no `...`.
    #[error("spec {spec:?}: the inputs' '...' covers {ndim} dimension(s) but the output has no '...' to receive them")]
    MissingOutputEllipsis {
        /// The spec string.
        spec: String,
        /// Number of broadcast dimensions.
        ndim: usize,
    },
    /// The number of operands given differs from the number of input terms.
    #[error("spec {spec:?} has {expected} input operand(s) but {given} were given")]
    OperandCount {
        /// The spec string.
        spec: String,
        /// Terms in the spec.
        expected: usize,
        /// Operands passed.
        given: usize,
    },
    /// An operand's rank does not match its subscripts.
    #[error("operand {operand} has rank {rank} but its subscripts {subscripts:?} {need}")]
    RankMismatch {
        /// Operand number (from 0).
        operand: usize,
        /// Its rank.
        rank: usize,
        /// Its subscripts as written.
        subscripts: String,
        /// What the subscripts need ("need rank 3", "need rank at least 2").
        need: String,
    },
    /// The same index bound to two different extents: within one operand (a diagonal), or
    /// across operands where neither is 1 (an extent of 1 broadcasts, as in numpy).
    #[error("index '{label}' has extent {first_extent} in operand {first_operand} (axis {first_axis}) but {second_extent} in operand {second_operand} (axis {second_axis})")]
    ExtentMismatch {
        /// The index.
        label: char,
        /// Operand where the index took its extent (the first where it is not 1).
        first_operand: usize,
        /// Axis in that operand.
        first_axis: usize,
        /// Extent there.
        first_extent: usize,
        /// Operand with the conflicting extent (may equal `first_operand`, e.g. `"ii"`).
        second_operand: usize,
        /// Axis in that operand.
        second_axis: usize,
        /// Conflicting extent.
        second_extent: usize,
    },
    /// Dimensions under `...` that cannot broadcast together.
    #[error("'...' dimensions cannot broadcast: broadcast dimension {dim} (counted from the right) has extent {first_extent} in operand {first_operand} but {second_extent} in operand {second_operand}")]
    Broadcast {
        /// Broadcast dimension, counted from the right end of the `...` block, from 0.
        dim: usize,
        /// First operand.
        first_operand: usize,
        /// Its extent.
        first_extent: usize,
        /// Second operand.
        second_operand: usize,
        /// Its extent.
        second_extent: usize,
    },
    /// The output array's shape differs from what the spec produces.
    #[error("output has shape {given:?} but spec {spec:?} produces shape {expected:?}")]
    OutputShape {
        /// The spec string.
        spec: String,
        /// Shape the spec produces.
        expected: Vec<usize>,
        /// Shape of the array passed.
        given: Vec<usize>,
    },
    /// The output view shares memory with an input, or with itself.
    #[error(
        "the output view overlaps {what}; pass an output that shares no memory with the inputs"
    )]
    Overlap {
        /// What it overlaps: "input operand 1", "itself".
        what: String,
    },
    /// A thread count above [`MAX_THREADS`](crate::threads::MAX_THREADS).
    #[error("{requested} threads requested: at most {max} are supported")]
    Threads {
        /// The count asked for (by the options, `with_threads` or `set_num_threads`).
        requested: usize,
        /// The largest count accepted.
        max: usize,
    },
    /// A size computation overflowed.
    #[error("size overflow: {what} does not fit in memory addresses")]
    SizeOverflow {
        /// What was being sized.
        what: String,
    },
    /// A workspace or result allocation failed.
    #[error("could not allocate {bytes} bytes of {what}")]
    Allocation {
        /// Bytes requested.
        bytes: usize,
        /// What the memory was for.
        what: String,
    },
    /// The workspace limit is below what every way of running the contraction needs.
    #[error(
        "workspace limit of {limit} bytes is too small: the contraction needs at least {needed} bytes (one-sided sums must be reduced into a buffer)"
    )]
    Workspace {
        /// Smallest workspace any candidate needs.
        needed: usize,
        /// The limit given.
        limit: usize,
    },
    /// A plan executed with operands of other layouts or another element type.
    #[error("plan mismatch: {0}")]
    PlanMismatch(String),
    /// A permutation that is not a permutation of `0..rank`.
    #[error("{perm:?} is not a permutation of 0..{rank}")]
    InvalidPermutation {
        /// The permutation given.
        perm: Vec<usize>,
        /// The rank it must permute.
        rank: usize,
    },
    /// A layout that is not valid (extents and strides of different lengths).
    #[error("invalid layout: {0}")]
    Layout(String),
    /// An operation that is valid einsum but not supported by the called entry point.
    #[error("{0}")]
    Unsupported(String),
    /// An inconsistency inside ttgt's own plan (a label a step needs missing from the
    /// operand it belongs to): a bug, reported instead of computing a wrong result.
    #[error("internal error (please report): {0}")]
    Internal(String),
    /// A contraction path that does not fit the spec, or no path within a memory limit.
    #[error("invalid contraction path: {0}")]
    InvalidPath(String),
    /// A GPU failure: no CUDA driver or device, out of device memory, a failed kernel launch
    /// or cuBLAS call (CUDA backend).
    #[error("GPU: {0}")]
    Gpu(String),
}
