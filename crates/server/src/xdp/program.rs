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
//! What goes to the socket: IPv4 without options and not a fragment, or
//! IPv6 whose next header is UDP, to one of the served address and port
//! pairs (an unspecified address matches any of its family). Anything
//! else the kernel sees as if no program were there, so fragments, IPv4
//! options and extension headers still reach the server's ordinary UDP
//! sockets.

use std::net::{IpAddr, SocketAddr};

/// `XDP_PASS`: hand the frame to the kernel's stack.
pub const XDP_PASS: i32 = 2;
/// The helper `bpf_redirect_map`'s number.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `src_reg` of a 64-bit immediate load that names a map by descriptor.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One eBPF instruction (`struct bpf_insn`), in the kernel's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    code: u8,
    /// Destination register in the low nibble, source in the high one.
    regs: u8,
    off: i16,
    imm: i32,
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
const LDX_W: u8 = 0x61;
const LDX_H: u8 = 0x69;
const LDX_B: u8 = 0x71;
const MOV64_K: u8 = 0xb7;
const MOV64_X: u8 = 0xbf;
const ADD64_K: u8 = 0x07;
const AND64_K: u8 = 0x57;
const JA: u8 = 0x05;
const JEQ_K: u8 = 0x15;
const JNE_K: u8 = 0x55;
const JGT_X: u8 = 0x2d;
/// 32-bit compare: an address word is compared as the u32 it is, not as
/// the sign-extended immediate a 64-bit compare would use.
const JNE32_K: u8 = 0x56;
const LD_IMM64: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

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
// argument; r6 keeps the context; r2 and r3 are the frame's start and end.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R5: u8 = 5;
const R6: u8 = 6;
const R7: u8 = 7;

/// Offsets in `struct xdp_md`.
const MD_DATA: i16 = 0;
const MD_DATA_END: i16 = 4;
const MD_RX_QUEUE: i16 = 16;

/// Ethernet header length, and where IP starts.
const ETH: i16 = 14;

/// A 16-bit field as the program's load sees network-order bytes.
fn be16(v: u16) -> i32 {
    i32::from(u16::from_ne_bytes(v.to_be_bytes()))
}

/// Four address bytes as the program's word load sees them.
fn word(b: [u8; 4]) -> i32 {
    i32::from_ne_bytes(b)
}

/// The program for `served` (the addresses whose UDP goes to the
/// sockets), redirecting through the XSKMAP whose descriptor is `map_fd`.
/// Panics if `served` is empty: a program that passes everything is a
/// mistake of the caller's.
pub fn assemble(served: &[SocketAddr], map_fd: i32) -> Vec<Insn> {
    assert!(!served.is_empty(), "nothing to serve");
    let mut a = Asm::new();
    let (pass, redirect, v4, v6) = (a.label(), a.label(), a.label(), a.label());
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
        a.jump(JEQ_K, R7, 0, be16(s.port()), redirect);
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
        a.jump(JEQ_K, R7, 0, be16(s.port()), redirect);
        a.place(next);
    }
    a.jump(JA, 0, 0, 0, pass);

    a.place(redirect);
    // bpf_redirect_map(map, rx_queue_index, XDP_PASS): a queue with no
    // socket in the map passes the frame to the kernel instead of
    // dropping it.
    a.op(Insn::new(LDX_W, R2, R6, MD_RX_QUEUE, 0));
    a.op(Insn::new(LD_IMM64, R1, BPF_PSEUDO_MAP_FD, 0, map_fd));
    a.op(Insn::new(0, 0, 0, 0, 0));
    a.op(Insn::new(MOV64_K, R3, 0, 0, XDP_PASS));
    a.op(Insn::new(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.op(Insn::new(EXIT, 0, 0, 0, 0));

    a.place(pass);
    a.op(Insn::new(MOV64_K, R0, 0, 0, XDP_PASS));
    a.op(Insn::new(EXIT, 0, 0, 0, 0));
    a.finish()
}

/// Continue only if the frame holds at least `len` bytes (the verifier
/// wants this comparison before any read below `len`).
fn bounds(a: &mut Asm, len: i16, fail: Label) {
    a.op(Insn::new(MOV64_X, R4, R2, 0, 0));
    a.op(Insn::new(ADD64_K, R4, 0, 0, i32::from(len)));
    a.jump(JGT_X, R4, R3, 0, fail);
}

/// A program run by hand over a frame, as the kernel would run it: what
/// it returns and the queue it redirects to (`None` for a pass). Only the
/// instructions [`assemble`] emits are understood. For the tests, which
/// must show what the program does with frames without loading it.
#[doc(hidden)]
pub fn interpret(prog: &[Insn], frame: &[u8], queue: u32) -> Option<u32> {
    let mut r = [0u64; 11];
    // The frame's bytes live at a made-up address: 0x1000.
    const BASE: u64 = 0x1000;
    let read = |addr: u64, n: usize| -> u64 {
        let off = (addr - BASE) as usize;
        let b = &frame[off..off + n];
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(b);
        u64::from_le_bytes(v)
    };
    let mut pc = 0usize;
    loop {
        let i = prog[pc];
        let (dst, src) = (usize::from(i.regs & 0x0f), usize::from(i.regs >> 4));
        let imm = i64::from(i.imm) as u64;
        let jump = |taken: bool| if taken { i.off as isize } else { 0 };
        let mut step = 0isize;
        match i.code {
            MOV64_X => r[dst] = r[src],
            MOV64_K => r[dst] = imm,
            ADD64_K => r[dst] = r[dst].wrapping_add(imm),
            AND64_K => r[dst] &= imm,
            LDX_W if i.regs >> 4 == R6 => {
                r[dst] = match i.off {
                    MD_DATA => BASE,
                    MD_DATA_END => BASE + frame.len() as u64,
                    MD_RX_QUEUE => u64::from(queue),
                    _ => panic!("context read at {}", i.off),
                }
            }
            LDX_W => r[dst] = read(r[src].wrapping_add(i.off as u64), 4),
            LDX_H => r[dst] = read(r[src].wrapping_add(i.off as u64), 2),
            LDX_B => r[dst] = read(r[src].wrapping_add(i.off as u64), 1),
            JA => step = i.off as isize,
            JEQ_K => step = jump(r[dst] == imm),
            JNE_K => step = jump(r[dst] != imm),
            JGT_X => step = jump(r[dst] > r[src]),
            JNE32_K => step = jump(r[dst] as u32 != i.imm as u32),
            LD_IMM64 => step = 1,
            CALL => return Some(r[R2 as usize] as u32),
            EXIT => {
                assert_eq!(r[0], XDP_PASS as u64);
                return None;
            }
            c => panic!("opcode {c:#x}"),
        }
        pc = (pc as isize + 1 + step) as usize;
    }
}
