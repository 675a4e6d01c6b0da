//! The buffers of the chunk movers, reserved once for a whole in-place plan: a plan either
//! fails (with nothing moved) while it reserves them, or runs to its end without allocating
//! (`InPlacePlan::execute`). A failure between two passes would leave a tensor half permuted.

use crate::error::{Error, Result};

/// Buffers of the chunk movers. Slot 0 is the serial mover's chunk buffer or the parallel
/// mover's saved sequence starts; slots `1..=threads` are the per-thread buffers.
///
/// ```
/// use ttgt::transpose::inplace::{InPlaceOptions, InPlacePlan};
/// let p = InPlacePlan::new(&[300, 7, 500], &[2, 1, 0], 8, &InPlaceOptions::default()).unwrap();
/// let mut v: Vec<f64> = (0..300 * 7 * 500).map(|x| x as f64).collect();
/// let mut s = p.reserve::<f64>().unwrap(); // every buffer of every pass, now
/// p.execute_with(&mut v, &mut s).unwrap(); // allocates nothing
/// assert_eq!(v[1], 500.0 * 7.0);
/// ```
#[derive(Debug, Default)]
pub struct Scratch<T> {
    bufs: Vec<Vec<T>>,
}

impl<T> Scratch<T> {
    /// No buffers yet.
    pub fn new() -> Self {
        Scratch { bufs: Vec::new() }
    }

    /// Makes slots `start..start + count` hold room for `len` elements each, allocating
    /// (fallibly) only where a slot has less.
    pub(crate) fn reserve(&mut self, start: usize, count: usize, len: usize) -> Result<()> {
        let end = start
            .checked_add(count)
            .ok_or_else(|| too_many(usize::MAX))?;
        if self.bufs.len() < end {
            self.bufs
                .try_reserve(end - self.bufs.len())
                .map_err(|_| too_many(end))?;
            self.bufs.resize_with(end, Vec::new);
        }
        for b in &mut self.bufs[start..end] {
            if b.capacity() < len {
                fail_point()?;
                b.clear();
                b.try_reserve_exact(len).map_err(|_| Error::Allocation {
                    bytes: len.saturating_mul(std::mem::size_of::<T>()),
                    what: "in-place transposition buffers".into(),
                })?;
            }
        }
        Ok(())
    }

    /// Slots `start..start + count`, emptied, each with room for `len` elements (reserved
    /// now when [`Scratch::reserve`] did not).
    pub(crate) fn take(&mut self, start: usize, count: usize, len: usize) -> Result<&mut [Vec<T>]> {
        self.reserve(start, count, len)?;
        let slots = &mut self.bufs[start..start + count];
        for b in slots.iter_mut() {
            b.clear();
        }
        Ok(slots)
    }
}

fn too_many(slots: usize) -> Error {
    Error::Allocation {
        bytes: slots.saturating_mul(std::mem::size_of::<Vec<u8>>()),
        what: "in-place transposition buffer list".into(),
    }
}

#[cfg(test)]
thread_local! {
    /// Tests: the number of buffer allocations that succeed before one fails (`None`: all
    /// succeed).
    static FAIL_AFTER: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

/// Tests: fail the buffer allocation after `n` more on this thread (`None`: stop failing).
#[cfg(test)]
pub(crate) fn fail_allocations_after(n: Option<usize>) {
    FAIL_AFTER.with(|f| f.set(n));
}

/// Tests: an injected allocation failure ([`fail_allocations_after`]); never otherwise.
pub(crate) fn fail_point() -> Result<()> {
    #[cfg(test)]
    {
        let left = FAIL_AFTER.with(|f| f.get());
        match left {
            Some(0) => {
                return Err(Error::Allocation {
                    bytes: 0,
                    what: "in-place transposition buffers (injected failure)".into(),
                })
            }
            Some(n) => FAIL_AFTER.with(|f| f.set(Some(n - 1))),
            None => {}
        }
    }
    Ok(())
}
