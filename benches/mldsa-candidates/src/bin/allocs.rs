//! Heap allocations per operation, every candidate: run under the
//! count_alloc.so shim (LD_PRELOAD), which counts C and Rust allocations.
use mldsa_candidates::{keygen, message, verify, Keys, CTX_RESPONSE, NAMES, SEED};
use std::hint::black_box;

const N: u64 = 200;

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

fn per_op(count: extern "C" fn() -> u64, mut f: impl FnMut()) -> f64 {
    f(); // warm up lazy initialisation
    let before = count();
    for _ in 0..N {
        f();
    }
    (count() - before) as f64 / N as f64
}

fn main() {
    let count = counter().expect("run with LD_PRELOAD=target/count_alloc.so");
    let keys = Keys::new(&SEED);
    let msg = message(92);
    let pk = keygen(0, &SEED);
    let sig = keys.sign(0, &msg, CTX_RESPONSE, None).unwrap();
    println!("| candidate | allocs/keygen | allocs/sign 92 B | allocs/verify 92 B |");
    println!("|---|---:|---:|---:|");
    for (i, name) in NAMES.iter().enumerate() {
        let k = per_op(count, || {
            black_box(keygen(black_box(i), &SEED));
        });
        let s = per_op(count, || {
            black_box(keys.sign(black_box(i), black_box(&msg), CTX_RESPONSE, None));
        });
        let v = per_op(count, || {
            assert!(verify(black_box(i), &pk, black_box(&msg), CTX_RESPONSE, &sig));
        });
        println!("| {name} | {k} | {s} | {v} |");
    }
}
