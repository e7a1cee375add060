//! What every fuzz target shares: an allocator that fails, as the test allocator does, any single
//! allocation over 256 MiB and any total over 1 GiB, so that a size taken from the input without a
//! cap ends the run as a crash ("memory allocation of N bytes failed") instead of passing unseen.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest single allocation allowed.
pub const MAX_ALLOCATION: usize = 256 << 20;
/// The most bytes allowed live at once.
pub const MAX_LIVE: usize = 1 << 30;

struct Capped {
    live: AtomicUsize,
}

#[global_allocator]
static ALLOCATOR: Capped = Capped {
    live: AtomicUsize::new(0),
};

impl Capped {
    fn admit(&self, size: usize) -> bool {
        if size > MAX_ALLOCATION {
            return false;
        }
        let before = self.live.fetch_add(size, Ordering::Relaxed);
        if before + size > MAX_LIVE {
            self.live.fetch_sub(size, Ordering::Relaxed);
            return false;
        }
        true
    }
}

// SAFETY: every call goes to the system allocator unchanged, or returns null (an allocation
// failure, which callers must handle).
unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !self.admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's contract.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !self.admit(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.live.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !self.admit(new_size - old) {
            return std::ptr::null_mut();
        }
        if new_size > MAX_ALLOCATION {
            self.live.fetch_sub(new_size - old, Ordering::Relaxed);
            return std::ptr::null_mut();
        }
        // SAFETY: as the caller's contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        match (p.is_null(), new_size > old) {
            (true, true) => {
                self.live.fetch_sub(new_size - old, Ordering::Relaxed);
            }
            (false, false) => {
                self.live.fetch_sub(old - new_size, Ordering::Relaxed);
            }
            _ => {}
        }
        p
    }
}

/// Run one target's function on one input (under the capped allocator).
pub fn run(target: fn(&[u8]), data: &[u8]) {
    target(data);
}
