//! Tensors as the rest of the crate sees them: element types ([`Element`], [`DType`]),
//! memory descriptions ([`Layout`]) and borrowed strided views ([`StridedView`],
//! [`StridedViewMut`]).

mod alloc;
mod element;
mod layout;
mod view;
mod workspace;

pub use alloc::{
    advise_huge, available_memory_bytes, ensure_available, huge_page_mode,
    CHECK_AVAILABLE_MIN_BYTES,
};
pub(crate) use alloc::{zeroed, zeroed_aligned};
pub use element::{bf16, f16, Complex32, Complex64, DType, Element};
pub(crate) use layout::spans_overlap;
pub use layout::{check_permutation, Layout};
pub use view::{StridedView, StridedViewMut};
pub use workspace::{
    release_workspace, retained_workspace_bytes, set_workspace_retention, workspace_retention,
};
pub(crate) use workspace::{take_aligned, Workspace};
