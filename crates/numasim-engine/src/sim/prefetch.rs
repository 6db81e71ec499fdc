//! Cache prefetch hints for the page state of upcoming events. A hint never changes a result;
//! it only lets the host fetch the next events' scattered per-page entries in parallel.

/// Ask the host CPU to bring `v[i]`'s cache line in (no-op out of bounds or off x86-64).
#[inline(always)]
pub fn prefetch<T>(v: &[T], i: usize) {
    if let Some(x) = v.get(i) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: prefetch is a hint on a valid reference's address; it reads nothing.
        unsafe {
            core::arch::x86_64::_mm_prefetch(x as *const T as *const i8, core::arch::x86_64::_MM_HINT_T0);
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = x;
    }
}
