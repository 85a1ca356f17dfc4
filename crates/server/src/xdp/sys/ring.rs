//! One ring shared with the kernel: the indices it and we move, the flags
//! word, the entries, and the rules for reading and writing them.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// One ring shared with the kernel: a producer and a consumer index, a
/// flags word, and `size` entries of `T`.
pub(super) struct Ring<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    map: NonNull<libc::c_void>,
    map_len: usize,
}

impl<T: Copy> Ring<T> {
    /// Map the ring at page offset `pgoff` of `fd`, laid out as `off` says.
    pub(super) fn map(
        fd: RawFd,
        pgoff: u64,
        off: &libc::xdp_ring_offset,
        size: u32,
    ) -> io::Result<Ring<T>> {
        let map_len = off.desc as usize + size as usize * size_of::<T>();
        // SAFETY: a fresh shared mapping of the socket's ring, of the length
        // the kernel's offsets give for `size` entries; checked for failure.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p.cast::<u8>();
        // SAFETY: the kernel's offsets lie inside the mapping, and its
        // index words are 4-byte aligned u32s that it updates atomically.
        unsafe {
            Ok(Ring {
                producer: NonNull::new_unchecked(base.add(off.producer as usize).cast()),
                consumer: NonNull::new_unchecked(base.add(off.consumer as usize).cast()),
                flags: NonNull::new_unchecked(base.add(off.flags as usize).cast()),
                entries: NonNull::new_unchecked(base.add(off.desc as usize).cast()),
                mask: size - 1,
                map: NonNull::new_unchecked(p),
                map_len,
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the mapping, which lives as long as self.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    pub(super) fn read(&self, index: u32) -> T {
        // SAFETY: `index & mask` < size, and the entry is one the kernel
        // produced and has not been given back (the callers' index rules).
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .read()
        }
    }

    pub(super) fn write(&self, index: u32, v: T) {
        // SAFETY: `index & mask` < size, and the entry is one the kernel
        // consumed (the callers' index rules).
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .write(v)
        }
    }

    /// Entries the kernel produced that we have not consumed, from `at`.
    pub(super) fn ready(&self) -> (u32, u32) {
        let at = self.consumer().load(Ordering::Relaxed);
        let n = self.producer().load(Ordering::Acquire).wrapping_sub(at);
        (at, n)
    }

    pub(super) fn release(&self, at: u32, n: u32) {
        self.consumer().store(at.wrapping_add(n), Ordering::Release);
    }

    /// Room to produce into, and where.
    pub(super) fn room(&self) -> (u32, u32) {
        let at = self.producer().load(Ordering::Relaxed);
        let used = at.wrapping_sub(self.consumer().load(Ordering::Acquire));
        (at, self.mask + 1 - used)
    }

    pub(super) fn submit(&self, at: u32, n: u32) {
        self.producer().store(at.wrapping_add(n), Ordering::Release);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.map.as_ptr(), self.map_len) };
    }
}
