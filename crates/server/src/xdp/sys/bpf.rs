//! The bpf(2) calls: the socket map, the program, the link.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::Xsk;
use crate::xdp::program::Insn;

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_TEST_RUN: libc::c_long = 10;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// The attribute block of one bpf(2) command: the kernel reads the
/// fields it knows and wants the rest zero.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }

    fn u32(&mut self, at: usize, v: u32) -> &mut Attr {
        self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn u64(&mut self, at: usize, v: u64) -> &mut Attr {
        self.0[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn bytes(&mut self, at: usize, v: &[u8]) -> &mut Attr {
        self.0[at..at + v.len()].copy_from_slice(v);
        self
    }
}

/// bpf(2); a descriptor for the commands that make an object.
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: `attr` is a live, writable, zero-padded block of the size
    // passed; the kernel reads (and for some commands writes) only within
    // it, and every pointer stored in it by the callers outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            size_of::<Attr>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn fd_of(r: i64) -> OwnedFd {
    // SAFETY: the commands that call this return a new descriptor that
    // nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// How the program runs on the interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// In the driver, before any socket buffer is made.
    Native,
    /// After the kernel made a socket buffer: works on every interface,
    /// saves less.
    Generic,
}

impl Mode {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Mode::Native => "native",
            Mode::Generic => "generic",
        }
    }
}

/// A BPF map with fixed-size keys and values, read and written by key.
struct Map {
    fd: OwnedFd,
    key: usize,
    value: usize,
}

impl Map {
    fn create(kind: u32, key: usize, value: usize, entries: u32, name: &[u8]) -> io::Result<Map> {
        let mut a = Attr::new();
        a.u32(0, kind)
            .u32(4, key as u32)
            .u32(8, value as u32)
            .u32(12, entries.max(1))
            .bytes(28, &name[..name.len().min(15)]);
        Ok(Map {
            fd: fd_of(bpf(BPF_MAP_CREATE, &mut a)?),
            key,
            value,
        })
    }

    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// The attribute block of an element command on `key`.
    fn element(&self, key: &[u8]) -> Attr {
        assert_eq!(key.len(), self.key, "a key of the map's size");
        let mut a = Attr::new();
        a.u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, key.as_ptr() as u64);
        a
    }

    fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        assert_eq!(value.len(), self.value, "a value of the map's size");
        let mut a = self.element(key);
        a.u64(16, value.as_ptr() as u64).u64(24, 0);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
    }

    fn delete(&self, key: &[u8]) -> io::Result<()> {
        bpf(BPF_MAP_DELETE_ELEM, &mut self.element(key)).map(|_| ())
    }

    fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<()> {
        assert_eq!(value.len(), self.value, "a value of the map's size");
        let mut a = self.element(key);
        a.u64(16, value.as_mut_ptr() as u64);
        bpf(BPF_MAP_LOOKUP_ELEM, &mut a).map(|_| ())
    }
}

/// The socket map: queue index to AF_XDP socket.
pub struct SocketMap(Map);

impl SocketMap {
    /// A map for queues `0..queues`.
    pub fn new(queues: u32) -> io::Result<SocketMap> {
        Map::create(BPF_MAP_TYPE_XSKMAP, 4, 4, queues, b"gnomon_xsks").map(SocketMap)
    }

    /// The descriptor the program's map load names.
    pub fn raw(&self) -> RawFd {
        self.0.raw()
    }

    /// Send queue `queue`'s frames to `xsk`.
    pub fn insert(&self, queue: u32, xsk: &Xsk) -> io::Result<()> {
        let value = xsk.raw() as u32;
        self.0.update(&queue.to_ne_bytes(), &value.to_ne_bytes())
    }
}

/// A set of 16-byte keys (IPv6 addresses, IPv4 ones mapped) the program
/// looks up: a hash map whose values mean nothing.
pub struct AddressSet(Map);

impl AddressSet {
    /// A set of at most `entries` addresses.
    pub fn new(entries: u32) -> io::Result<AddressSet> {
        Map::create(BPF_MAP_TYPE_HASH, 16, 4, entries, b"gnomon_local").map(AddressSet)
    }

    /// The descriptor the program's map load names.
    pub fn raw(&self) -> RawFd {
        self.0.raw()
    }

    /// Add `key` (no error when it is there already).
    pub fn insert(&self, key: &[u8; 16]) -> io::Result<()> {
        self.0.update(key, &[1, 0, 0, 0])
    }

    /// Remove `key`.
    pub fn remove(&self, key: &[u8; 16]) -> io::Result<()> {
        self.0.delete(key)
    }
}

/// An array of 8-byte values indexed from 0: the program's settings (the
/// interface's own MAC) or its counters.
pub struct Array(Map);

impl Array {
    /// An array of `entries` zeroed values.
    pub fn new(entries: u32, name: &[u8]) -> io::Result<Array> {
        Map::create(BPF_MAP_TYPE_ARRAY, 4, 8, entries, name).map(Array)
    }

    /// The descriptor the program's map load names.
    pub fn raw(&self) -> RawFd {
        self.0.raw()
    }

    /// Set entry `index`.
    pub fn set(&self, index: u32, value: [u8; 8]) -> io::Result<()> {
        self.0.update(&index.to_ne_bytes(), &value)
    }

    /// Entry `index`.
    pub fn get(&self, index: u32) -> io::Result<[u8; 8]> {
        let mut v = [0u8; 8];
        self.0.lookup(&index.to_ne_bytes(), &mut v)?;
        Ok(v)
    }
}

/// A loaded program.
pub struct Program(OwnedFd);

impl Program {
    /// Load `insns` as an XDP program. On refusal the error carries the
    /// verifier's log, which says which instruction it objected to.
    pub fn load(insns: &[Insn]) -> io::Result<Program> {
        let license = b"Apache-2.0 OR MIT\0";
        let mut log = vec![0u8; 64 * 1024];
        let mut a = Attr::new();
        a.u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, insns.len() as u32)
            .u64(8, insns.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .bytes(48, b"gnomon_udp")
            .u32(68, BPF_XDP);
        match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => Ok(Program(fd_of(fd))),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let said = String::from_utf8_lossy(&log[..end]);
                let tail: String = said.lines().rev().take(6).collect::<Vec<_>>().join(" / ");
                Err(io::Error::new(
                    e.kind(),
                    format!("the kernel refused the XDP program: {e}; verifier: {tail}"),
                ))
            }
        }
    }

    /// Run the loaded program once over `frame` in the kernel, without any
    /// interface (`BPF_PROG_TEST_RUN`): what it returned. For the tests,
    /// which check that the kernel does what the interpreter says.
    pub fn test_run(&self, frame: &[u8]) -> io::Result<u32> {
        self.test_runs(frame, 1).map(|(r, _)| r)
    }

    /// [`Program::test_run`] `repeat` times in the kernel: what it returned
    /// and the kernel's mean time per run, ns (for the benchmark).
    pub fn test_runs(&self, frame: &[u8], repeat: u32) -> io::Result<(u32, u32)> {
        let mut a = Attr::new();
        a.u32(0, self.0.as_raw_fd() as u32)
            .u32(8, frame.len() as u32)
            .u64(16, frame.as_ptr() as u64)
            .u32(32, repeat);
        bpf(BPF_PROG_TEST_RUN, &mut a)?;
        let word = |at: usize| u32::from_ne_bytes([a.0[at], a.0[at + 1], a.0[at + 2], a.0[at + 3]]);
        Ok((word(4), word(36)))
    }
}

/// The program attached to an interface; dropping it (or the process
/// ending) detaches it.
pub struct Attachment {
    _link: OwnedFd,
    /// Where it runs.
    pub mode: Mode,
}

impl Attachment {
    /// Attach `prog` to interface `ifindex`, in the driver when it can
    /// run there, else generic, or only in `mode` when one is given.
    pub fn attach(prog: &Program, ifindex: u32, mode: Option<Mode>) -> io::Result<Attachment> {
        let try_mode = |m: Mode| {
            let flags = match m {
                Mode::Native => XDP_FLAGS_DRV_MODE,
                Mode::Generic => XDP_FLAGS_SKB_MODE,
            };
            let mut a = Attr::new();
            a.u32(0, prog.0.as_raw_fd() as u32)
                .u32(4, ifindex)
                .u32(8, BPF_XDP)
                .u32(12, flags);
            bpf(BPF_LINK_CREATE, &mut a).map(|fd| Attachment {
                _link: fd_of(fd),
                mode: m,
            })
        };
        match mode {
            Some(m) => try_mode(m),
            None => try_mode(Mode::Native).or_else(|native| {
                // EBUSY: another program is there; generic would not help.
                if native.raw_os_error() == Some(libc::EBUSY) {
                    Err(native)
                } else {
                    try_mode(Mode::Generic)
                }
            }),
        }
    }
}
