//! Heap allocations per signature, every candidate: run under the
//! count_alloc.so shim (LD_PRELOAD), which counts C and Rust allocations.
use sign_candidates::{message, Candidates, NAMES};
use std::hint::black_box;

const N: u64 = 1000;

fn counter() -> Option<extern "C" fn() -> u64> {
    let name = c"alloc_shim_count";
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name; the symbol,
    // when the shim is preloaded, is `unsigned long alloc_shim_count(void)`.
    let f = unsafe { libc_dlsym(std::ptr::null_mut(), name.as_ptr()) };
    if f.is_null() {
        None
    } else {
        // SAFETY: see above: the shim's function has this signature.
        Some(unsafe { std::mem::transmute::<*mut u8, extern "C" fn() -> u64>(f) })
    }
}

extern "C" {
    #[link_name = "dlsym"]
    fn libc_dlsym(handle: *mut u8, name: *const std::ffi::c_char) -> *mut u8;
}

fn main() {
    let count = counter().expect("run with LD_PRELOAD=target/count_alloc.so");
    let keys = Candidates::new();
    let msg = message();
    for (i, name) in NAMES.iter().enumerate() {
        black_box(keys.sign(i, &msg)); // warm up lazy initialisation
        let before = count();
        for _ in 0..N {
            black_box(keys.sign(black_box(i), black_box(&msg)));
        }
        let after = count();
        println!("{name}: {} allocations per signature ({} in {N})", (after - before) as f64 / N as f64, after - before);
    }
}
