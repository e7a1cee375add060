//! A global allocator for tests that refuses any single allocation over [`MAX_ONE`] and any
//! total live size over [`MAX_LIVE`], aborting with a message that names the size: installed in
//! the binary by the `alloc-limit` feature (`scripts/test` builds with it) and in the integration
//! test binary, so that a size taken from the wire and allocated before it was checked (ARCHITECTURE
//! rule 7) fails every test that meets it, not only the tests written for it. The product's own
//! bounds are far below these (a restore peaks at tens of MiB).

// A `GlobalAlloc` is `unsafe` by definition; this one only counts and forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest single allocation admitted: 256 MiB.
pub const MAX_ONE: usize = 256 << 20;

/// The most bytes live at once: 1 GiB.
pub const MAX_LIVE: usize = 1 << 30;

/// Why an allocation is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Over [`MAX_ONE`] at once.
    One,
    /// It would take the live total over [`MAX_LIVE`].
    Live,
}

/// Whether an allocation of `size` bytes (growing the live total by `grow`) is admitted with
/// `live` bytes live before it.
///
/// # Errors
/// The [`Refusal`].
pub fn admits(live: usize, size: usize, grow: usize) -> Result<(), Refusal> {
    if size > MAX_ONE {
        return Err(Refusal::One);
    }
    if live.saturating_add(grow) > MAX_LIVE {
        return Err(Refusal::Live);
    }
    Ok(())
}

/// The allocator: [`System`], counting the live bytes.
#[derive(Debug)]
pub struct Limited {
    live: AtomicUsize,
}

impl Limited {
    /// Nothing live yet.
    pub const fn new() -> Self {
        Limited {
            live: AtomicUsize::new(0),
        }
    }

    /// Count `grow` more bytes live for an allocation of `size`, or abort.
    fn take(&self, size: usize, grow: usize) {
        let live = self.live.fetch_add(grow, Ordering::Relaxed);
        if let Err(why) = admits(live, size, grow) {
            refuse(size, live, why);
        }
    }

    fn give_back(&self, bytes: usize) {
        self.live.fetch_sub(bytes, Ordering::Relaxed);
    }
}

impl Default for Limited {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to `System` with the caller's layout and pointer unchanged.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.take(layout.size(), layout.size());
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            self.give_back(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.take(layout.size(), layout.size());
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            self.give_back(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) };
        self.give_back(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        let grow = new_size.saturating_sub(old);
        self.take(new_size, grow);
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if p.is_null() {
            self.give_back(grow);
        } else if new_size < old {
            self.give_back(old - new_size);
        }
        p
    }
}

/// Say which allocation was refused, on stderr, and abort: nothing here allocates.
fn refuse(size: usize, live: usize, why: Refusal) -> ! {
    let mut msg = Buf::default();
    let _ = std::fmt::Write::write_fmt(
        &mut msg,
        format_args!(
            "git-session alloc-limit: refused an allocation of {size} bytes ({}; {live} bytes \
             live): a size allocated before it was checked? (the test allocator of the \
             alloc-limit feature)\n",
            match why {
                Refusal::One => "over 256 MiB at once",
                Refusal::Live => "over 1 GiB live in all",
            }
        ),
    );
    // SAFETY: writing initialised bytes of a live buffer to the standard error descriptor.
    unsafe { libc::write(2, msg.bytes.as_ptr().cast(), msg.len) };
    std::process::abort()
}

/// A message on the stack.
struct Buf {
    bytes: [u8; 512],
    len: usize,
}

impl Default for Buf {
    fn default() -> Self {
        Buf {
            bytes: [0; 512],
            len: 0,
        }
    }
}

impl std::fmt::Write for Buf {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let n = s.len().min(self.bytes.len() - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_over_the_limits_are_refused() {
        assert_eq!(admits(0, MAX_ONE, MAX_ONE), Ok(()));
        assert_eq!(admits(0, MAX_ONE + 1, MAX_ONE + 1), Err(Refusal::One));
        assert_eq!(admits(MAX_LIVE - 10, 10, 10), Ok(()));
        assert_eq!(admits(MAX_LIVE - 10, 11, 11), Err(Refusal::Live));
        // A realloc grows the live total only by the difference.
        assert_eq!(admits(MAX_LIVE - 10, 200 << 20, 10), Ok(()));
    }
}
