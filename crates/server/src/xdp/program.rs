//! The XDP program, assembled here from the served addresses: a few dozen
//! eBPF instructions that send the UDP datagrams for those addresses and
//! ports to the AF_XDP socket of the queue they arrived on, and pass every
//! other frame to the kernel untouched.
//!
//! Written as instructions rather than compiled from C or Rust so that
//! building gnomon needs no BPF toolchain (docs/DESIGN.md, "The AF_XDP
//! datapath"). The program is small enough to read whole: each branch
//! below is one test of one header field, and the verifier checks every
//! packet read against the frame's end before the program can load.
//!
//! What goes to the socket is what the kernel would deliver to the served
//! UDP sockets, and only that:
//!
//! - IPv4 without options and not a fragment, or IPv6 whose next header
//!   is UDP, to one of the served address and port pairs;
//! - for an unspecified (wildcard) served address, a destination that is
//!   one of the host's own addresses (the `local` map, kept current by
//!   [`super::gate::Gate`]), as a wildcard socket accepts;
//! - sent to the interface's own MAC address (the `settings` map) from a
//!   unicast one: a broadcast, multicast or other host's frame is the
//!   kernel's to judge, and a reply never goes to a group address;
//! - neither address a loopback one (the kernel drops those from a wire as
//!   martians), and the source not one of the host's own addresses.
//!
//! Anything else the kernel sees as if no program were there, so
//! fragments, IPv4 options and extension headers still reach the server's
//! ordinary UDP sockets, and a frame the kernel would drop is dropped by
//! the kernel. A frame for a served port left to the kernel by one of the
//! checks above is counted under its [`Passed`] reason.

use std::net::{IpAddr, SocketAddr};

/// `XDP_PASS`: hand the frame to the kernel's stack.
pub const XDP_PASS: i32 = 2;
/// The helper `bpf_map_lookup_elem`'s number.
const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// The helper `bpf_redirect_map`'s number.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `src_reg` of a 64-bit immediate load that names a map by descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One eBPF instruction (`struct bpf_insn`), in the kernel's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub(super) code: u8,
    /// Destination register in the low nibble, source in the high one.
    pub(super) regs: u8,
    pub(super) off: i16,
    pub(super) imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}

// Opcodes: class | operation | source. Only those the program uses.
pub(super) const LDX_W: u8 = 0x61;
pub(super) const LDX_H: u8 = 0x69;
pub(super) const LDX_B: u8 = 0x71;
/// Store an immediate to memory (the stack), 4 and 8 bytes.
pub(super) const ST_W: u8 = 0x62;
pub(super) const ST_DW: u8 = 0x7a;
/// Store a register to memory (the stack), 4 bytes.
pub(super) const STX_W: u8 = 0x63;
/// `lock *(u64 *)(dst + off) += src`: a counter shared by every CPU.
pub(super) const ATOMIC_ADD_DW: u8 = 0xdb;
pub(super) const MOV64_K: u8 = 0xb7;
pub(super) const MOV64_X: u8 = 0xbf;
pub(super) const ADD64_K: u8 = 0x07;
pub(super) const AND64_K: u8 = 0x57;
pub(super) const JA: u8 = 0x05;
pub(super) const JEQ_K: u8 = 0x15;
pub(super) const JNE_K: u8 = 0x55;
pub(super) const JNE_X: u8 = 0x5d;
pub(super) const JGT_X: u8 = 0x2d;
/// 32-bit compares: an address word is compared as the u32 it is, not as
/// the sign-extended immediate a 64-bit compare would use.
pub(super) const JNE32_K: u8 = 0x56;
pub(super) const JEQ32_K: u8 = 0x16;
pub(super) const LD_IMM64: u8 = 0x18;
pub(super) const CALL: u8 = 0x85;
pub(super) const EXIT: u8 = 0x95;

/// A jump target, resolved when the program is finished.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Label(usize);

/// Instructions under construction, with jumps to labels not yet placed.
struct Asm {
    insns: Vec<Insn>,
    /// Placed labels: instruction index, or `usize::MAX` until placed.
    at: Vec<usize>,
    /// (instruction index, label) of every jump to patch.
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    fn new() -> Asm {
        Asm {
            insns: Vec::new(),
            at: Vec::new(),
            fixups: Vec::new(),
        }
    }

    fn label(&mut self) -> Label {
        self.at.push(usize::MAX);
        Label(self.at.len() - 1)
    }

    /// Whether some jump goes to `l`: code only reached through it is
    /// emitted only then (the verifier refuses unreachable instructions).
    fn used(&self, l: Label) -> bool {
        self.fixups.iter().any(|&(_, to)| to == l)
    }

    fn place(&mut self, l: Label) {
        self.at[l.0] = self.insns.len();
    }

    fn op(&mut self, i: Insn) {
        self.insns.push(i);
    }

    fn jump(&mut self, code: u8, dst: u8, src: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.op(Insn::new(code, dst, src, 0, imm));
    }

    fn finish(mut self) -> Vec<Insn> {
        for (i, l) in self.fixups {
            let target = self.at[l.0];
            assert!(target != usize::MAX, "a jump to a label never placed");
            // Relative to the instruction after the jump.
            self.insns[i].off = i16::try_from(target as isize - i as isize - 1)
                .expect("the program is a few dozen instructions");
        }
        self.insns
    }
}

// Registers: r1 holds the context on entry and the helper's first
// argument; r6 keeps the context; r2 and r3 are the frame's start and end
// until the first helper call (which clobbers r1-r5); r7 and r8 keep the
// frame's destination MAC across the call that fetches ours; r10 is the
// stack's top, read-only.
pub(super) const R0: u8 = 0;
pub(super) const R1: u8 = 1;
pub(super) const R2: u8 = 2;
pub(super) const R3: u8 = 3;
pub(super) const R4: u8 = 4;
pub(super) const R5: u8 = 5;
pub(super) const R6: u8 = 6;
pub(super) const R7: u8 = 7;
pub(super) const R8: u8 = 8;
pub(super) const R10: u8 = 10;

/// Offsets in `struct xdp_md`.
pub(super) const MD_DATA: i16 = 0;
pub(super) const MD_DATA_END: i16 = 4;
pub(super) const MD_RX_QUEUE: i16 = 16;

/// The stack: the destination address as a `local` key (16 bytes, IPv4
/// mapped), the source's, and the keys of the two array lookups.
pub(super) const STACK_DST: i16 = -16;
pub(super) const STACK_SRC: i16 = -32;
const STACK_SETTINGS_KEY: i16 = -36;
const STACK_COUNTER_KEY: i16 = -40;

/// The maps the program reads, by descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Maps {
    /// Queue index to AF_XDP socket (XSKMAP).
    pub xsks: i32,
    /// Entry 0: the interface's own MAC address in its first six bytes.
    pub settings: i32,
    /// The host's own addresses, 16-byte keys (IPv4 mapped into IPv6).
    pub local: i32,
    /// One counter per [`Passed`] reason.
    pub passed: i32,
}

/// Why a frame for a served port was left to the kernel rather than
/// answered here; each is a counter in the `passed` map, at its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passed {
    /// To a broadcast or multicast MAC address.
    GroupDestination = 0,
    /// To another host's unicast MAC address.
    OtherHost = 1,
    /// From a broadcast or multicast MAC address (no reply may go there).
    GroupSource = 2,
    /// From or to a loopback address (127.0.0.0/8, ::1) off a wire.
    Loopback = 3,
    /// To an address this host does not have (wildcard listen).
    NotLocal = 4,
    /// From an address this host has.
    LocalSource = 5,
}

impl Passed {
    /// Every reason, in index order.
    pub const ALL: [Passed; 6] = [
        Passed::GroupDestination,
        Passed::OtherHost,
        Passed::GroupSource,
        Passed::Loopback,
        Passed::NotLocal,
        Passed::LocalSource,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Passed::GroupDestination => "group_destination",
            Passed::OtherHost => "other_host",
            Passed::GroupSource => "group_source",
            Passed::Loopback => "loopback",
            Passed::NotLocal => "not_local",
            Passed::LocalSource => "local_source",
        }
    }
}

/// Ethernet header length, and where IP starts.
pub(super) const ETH: i16 = 14;

/// A 16-bit field as the program's load sees network-order bytes.
pub(super) fn be16(v: u16) -> i32 {
    i32::from(u16::from_ne_bytes(v.to_be_bytes()))
}

/// Four address bytes as the program's word load sees them.
pub(super) fn word(b: [u8; 4]) -> i32 {
    i32::from_ne_bytes(b)
}

/// The program for `served` (the addresses whose UDP goes to the
/// sockets), reading `maps`. Panics if `served` is empty: a program that
/// passes everything is a mistake of the caller's.
pub fn assemble(served: &[SocketAddr], maps: &Maps) -> Vec<Insn> {
    assert!(!served.is_empty(), "nothing to serve");
    let mut a = Asm::new();
    let (pass, redirect, v4, v6) = (a.label(), a.label(), a.label(), a.label());
    let count = Passed::ALL.map(|_| a.label());
    // Where a matched frame goes to be checked: by family, and whether its
    // served address was the wildcard.
    let checks = [[a.label(), a.label()], [a.label(), a.label()]];
    a.op(Insn::new(MOV64_X, R6, R1, 0, 0));
    a.op(Insn::new(LDX_W, R2, R6, MD_DATA, 0));
    a.op(Insn::new(LDX_W, R3, R6, MD_DATA_END, 0));
    bounds(&mut a, ETH, pass);
    a.op(Insn::new(LDX_H, R5, R2, 12, 0));
    a.jump(JEQ_K, R5, 0, be16(0x0800), v4);
    a.jump(JEQ_K, R5, 0, be16(0x86dd), v6);
    a.jump(JA, 0, 0, 0, pass);

    a.place(v4);
    // IPv4 header (20, no options) and the UDP header.
    bounds(&mut a, ETH + 20 + 8, pass);
    // Version 4, header length 5: options go to the kernel.
    a.op(Insn::new(LDX_B, R5, R2, ETH, 0));
    a.jump(JNE_K, R5, 0, 0x45, pass);
    a.op(Insn::new(LDX_B, R5, R2, ETH + 9, 0));
    a.jump(JNE_K, R5, 0, 17, pass);
    // More-fragments flag or an offset: the kernel reassembles.
    a.op(Insn::new(LDX_H, R5, R2, ETH + 6, 0));
    a.op(Insn::new(AND64_K, R5, 0, 0, be16(0x3fff)));
    a.jump(JNE_K, R5, 0, 0, pass);
    a.op(Insn::new(LDX_W, R5, R2, ETH + 16, 0));
    a.op(Insn::new(LDX_H, R7, R2, ETH + 20 + 2, 0));
    for s in served {
        let IpAddr::V4(ip) = s.ip() else { continue };
        let next = a.label();
        if !ip.is_unspecified() {
            a.jump(JNE32_K, R5, 0, word(ip.octets()), next);
        }
        let to = checks[0][usize::from(ip.is_unspecified())];
        a.jump(JEQ_K, R7, 0, be16(s.port()), to);
        a.place(next);
    }
    a.jump(JA, 0, 0, 0, pass);

    a.place(v6);
    bounds(&mut a, ETH + 40 + 8, pass);
    a.op(Insn::new(LDX_B, R5, R2, ETH + 6, 0));
    a.jump(JNE_K, R5, 0, 17, pass);
    a.op(Insn::new(LDX_H, R7, R2, ETH + 40 + 2, 0));
    for s in served {
        let IpAddr::V6(ip) = s.ip() else { continue };
        let next = a.label();
        if !ip.is_unspecified() {
            for (k, w) in ip.octets().chunks_exact(4).enumerate() {
                a.op(Insn::new(LDX_W, R5, R2, ETH + 24 + 4 * k as i16, 0));
                a.jump(JNE32_K, R5, 0, word([w[0], w[1], w[2], w[3]]), next);
            }
        }
        let to = checks[1][usize::from(ip.is_unspecified())];
        a.jump(JEQ_K, R7, 0, be16(s.port()), to);
        a.place(next);
    }
    a.jump(JA, 0, 0, 0, pass);

    for (family, labels) in checks.iter().enumerate() {
        for (wildcard, &at) in labels.iter().enumerate() {
            if !a.used(at) {
                continue;
            }
            a.place(at);
            check(
                &mut a,
                family == 1,
                wildcard == 1,
                maps,
                &count,
                redirect,
                pass,
            );
        }
    }

    a.place(redirect);
    // bpf_redirect_map(map, rx_queue_index, XDP_PASS): a queue with no
    // socket in the map passes the frame to the kernel instead of
    // dropping it.
    a.op(Insn::new(LDX_W, R2, R6, MD_RX_QUEUE, 0));
    load_map(&mut a, maps.xsks);
    a.op(Insn::new(MOV64_K, R3, 0, 0, XDP_PASS));
    a.op(Insn::new(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.op(Insn::new(EXIT, 0, 0, 0, 0));

    // Count the reason, then pass. The counter is shared by every CPU: an
    // atomic add, on a path only misdirected frames take.
    for (reason, &at) in Passed::ALL.iter().zip(&count) {
        if !a.used(at) {
            continue;
        }
        a.place(at);
        a.op(Insn::new(ST_W, R10, 0, STACK_COUNTER_KEY, *reason as i32));
        lookup(&mut a, maps.passed, STACK_COUNTER_KEY);
        a.jump(JEQ_K, R0, 0, 0, pass);
        a.op(Insn::new(MOV64_K, R1, 0, 0, 1));
        a.op(Insn::new(ATOMIC_ADD_DW, R0, R1, 0, 0));
        a.jump(JA, 0, 0, 0, pass);
    }

    a.place(pass);
    a.op(Insn::new(MOV64_K, R0, 0, 0, XDP_PASS));
    a.op(Insn::new(EXIT, 0, 0, 0, 0));
    a.finish()
}

/// The checks a frame for a served address and port must pass before it
/// is redirected, with r2 the frame's start and its IP and UDP headers
/// already bounded. Every read of the frame comes before the first helper
/// call, which clobbers r2.
fn check(
    a: &mut Asm,
    v6: bool,
    wildcard: bool,
    maps: &Maps,
    count: &[Label; Passed::ALL.len()],
    redirect: Label,
    pass: Label,
) {
    let reason = |p: Passed| count[p as usize];
    // Both addresses onto the stack as `local` keys.
    if v6 {
        for (to, from) in [(STACK_DST, ETH + 24), (STACK_SRC, ETH + 8)] {
            for k in 0..4 {
                a.op(Insn::new(LDX_W, R1, R2, from + 4 * k, 0));
                a.op(Insn::new(STX_W, R10, R1, to + 4 * k, 0));
            }
        }
        // ::1, either way.
        for at in [STACK_DST, STACK_SRC] {
            let next = a.label();
            for k in 0..3 {
                a.op(Insn::new(LDX_W, R1, R10, at + 4 * k, 0));
                a.jump(JNE32_K, R1, 0, 0, next);
            }
            a.op(Insn::new(LDX_W, R1, R10, at + 12, 0));
            a.jump(JEQ32_K, R1, 0, word([0, 0, 0, 1]), reason(Passed::Loopback));
            a.place(next);
        }
    } else {
        for (to, from) in [(STACK_DST, ETH + 16), (STACK_SRC, ETH + 12)] {
            a.op(Insn::new(ST_DW, R10, 0, to, 0));
            a.op(Insn::new(ST_W, R10, 0, to + 8, word([0, 0, 0xff, 0xff])));
            a.op(Insn::new(LDX_W, R1, R2, from, 0));
            a.op(Insn::new(STX_W, R10, R1, to + 12, 0));
            // 127.0.0.0/8: the first byte.
            a.op(Insn::new(LDX_B, R1, R2, from, 0));
            a.jump(JEQ_K, R1, 0, 127, reason(Passed::Loopback));
        }
    }
    // The group bit is the first transmitted bit: the low bit of byte 0.
    a.op(Insn::new(LDX_B, R1, R2, 6, 0));
    a.op(Insn::new(AND64_K, R1, 0, 0, 1));
    a.jump(JNE_K, R1, 0, 0, reason(Passed::GroupSource));
    a.op(Insn::new(LDX_B, R1, R2, 0, 0));
    a.op(Insn::new(AND64_K, R1, 0, 0, 1));
    a.jump(JNE_K, R1, 0, 0, reason(Passed::GroupDestination));
    a.op(Insn::new(LDX_W, R7, R2, 0, 0));
    a.op(Insn::new(LDX_H, R8, R2, 4, 0));
    // Our MAC, loaded the same way: the words compare whatever the byte
    // order.
    a.op(Insn::new(ST_W, R10, 0, STACK_SETTINGS_KEY, 0));
    lookup(a, maps.settings, STACK_SETTINGS_KEY);
    a.jump(JEQ_K, R0, 0, 0, pass);
    a.op(Insn::new(LDX_W, R1, R0, 0, 0));
    a.jump(JNE_X, R1, R7, 0, reason(Passed::OtherHost));
    a.op(Insn::new(LDX_H, R1, R0, 4, 0));
    a.jump(JNE_X, R1, R8, 0, reason(Passed::OtherHost));
    if wildcard {
        lookup(a, maps.local, STACK_DST);
        a.jump(JEQ_K, R0, 0, 0, reason(Passed::NotLocal));
    }
    lookup(a, maps.local, STACK_SRC);
    a.jump(JNE_K, R0, 0, 0, reason(Passed::LocalSource));
    a.jump(JA, 0, 0, 0, redirect);
}

/// r1 = the map `fd` (a 64-bit immediate load: two instructions).
fn load_map(a: &mut Asm, fd: i32) {
    a.op(Insn::new(LD_IMM64, R1, BPF_PSEUDO_MAP_FD, 0, fd));
    a.op(Insn::new(0, 0, 0, 0, 0));
}

/// r0 = bpf_map_lookup_elem(map `fd`, the key at r10 + `key`): a pointer to
/// the value, or 0.
fn lookup(a: &mut Asm, fd: i32, key: i16) {
    load_map(a, fd);
    a.op(Insn::new(MOV64_X, R2, R10, 0, 0));
    a.op(Insn::new(ADD64_K, R2, 0, 0, i32::from(key)));
    a.op(Insn::new(CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM));
}

/// Continue only if the frame holds at least `len` bytes (the verifier
/// wants this comparison before any read below `len`).
fn bounds(a: &mut Asm, len: i16, fail: Label) {
    a.op(Insn::new(MOV64_X, R4, R2, 0, 0));
    a.op(Insn::new(ADD64_K, R4, 0, 0, i32::from(len)));
    a.jump(JGT_X, R4, R3, 0, fail);
}
