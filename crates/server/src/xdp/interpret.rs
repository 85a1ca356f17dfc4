//! The XDP program run by hand over a frame, as the kernel would run it,
//! with the maps it reads played by a [`Host`]. For the tests, which must
//! show what the program does with frames without loading it; only the
//! instructions [`super::program::assemble`] emits are understood, and a
//! read outside the frame, the stack or a map value panics.

use std::collections::BTreeSet;
use std::net::IpAddr;

use super::program::*;

/// What the maps hold: the host the program runs on.
#[derive(Clone, Debug)]
pub struct Host {
    /// The maps' descriptors, as the program was assembled with.
    pub maps: Maps,
    /// The interface's own MAC address (`settings`).
    pub mac: [u8; 6],
    /// The host's own addresses (`local`).
    pub local: BTreeSet<IpAddr>,
    /// The `passed` counters, by reason.
    pub passed: [u64; Passed::ALL.len()],
}

impl Host {
    /// A host with `mac` and `local`, the maps numbered 1 to 4.
    pub fn new(mac: [u8; 6], local: impl IntoIterator<Item = IpAddr>) -> Host {
        Host {
            maps: Maps {
                xsks: 1,
                settings: 2,
                local: 3,
                passed: 4,
            },
            mac,
            local: local.into_iter().collect(),
            passed: [0; Passed::ALL.len()],
        }
    }
}

// Made-up addresses of what the program can point at.
const FRAME: u64 = 0x1000;
const STACK_TOP: u64 = 0x10_0000;
const STACK_SIZE: u64 = 512;
const SETTINGS_VALUE: u64 = 0x20_0000;
const LOCAL_VALUE: u64 = 0x30_0000;
const PASSED_VALUES: u64 = 0x40_0000;

/// Run `prog` over `frame` arriving on `queue`: the queue it redirects to,
/// or `None` for a pass. Counters the program adds to are added to in
/// `host`.
pub fn interpret(prog: &[Insn], frame: &[u8], queue: u32, host: &mut Host) -> Option<u32> {
    let mut r = [0u64; 11];
    r[R10 as usize] = STACK_TOP;
    let mut stack = [0u8; STACK_SIZE as usize];
    // Which stack bytes were written: a key read before it is whole would
    // be refused by the verifier.
    let mut written = [false; STACK_SIZE as usize];
    let mut settings = [0u8; 8];
    settings[..6].copy_from_slice(&host.mac);
    let mut pc = 0usize;
    loop {
        let i = prog[pc];
        let (dst, src) = (usize::from(i.regs & 0x0f), usize::from(i.regs >> 4));
        let imm = i64::from(i.imm) as u64;
        let jump = |taken: bool| if taken { i.off as isize } else { 0 };
        let at = |base: u64| base.wrapping_add(i.off as u64);
        let read = |addr: u64, n: usize, stack: &[u8], written: &[bool]| -> u64 {
            let mut v = [0u8; 8];
            let bytes: &[u8] = if (FRAME..FRAME + frame.len() as u64).contains(&addr) {
                let off = (addr - FRAME) as usize;
                &frame[off..off + n]
            } else if (STACK_TOP - STACK_SIZE..STACK_TOP).contains(&addr) {
                let off = (addr - (STACK_TOP - STACK_SIZE)) as usize;
                assert!(
                    written[off..off + n].iter().all(|&w| w),
                    "a stack read before a write"
                );
                &stack[off..off + n]
            } else if (SETTINGS_VALUE..SETTINGS_VALUE + 8).contains(&addr) {
                let off = (addr - SETTINGS_VALUE) as usize;
                &settings[off..off + n]
            } else {
                panic!("a read at {addr:#x} outside the frame, stack and values");
            };
            v[..n].copy_from_slice(bytes);
            u64::from_le_bytes(v)
        };
        let mut step = 0isize;
        match i.code {
            MOV64_X => r[dst] = r[src],
            MOV64_K => r[dst] = imm,
            ADD64_K => r[dst] = r[dst].wrapping_add(imm),
            AND64_K => r[dst] &= imm,
            LDX_W if src == R6 as usize => {
                r[dst] = match i.off {
                    MD_DATA => FRAME,
                    MD_DATA_END => FRAME + frame.len() as u64,
                    MD_RX_QUEUE => u64::from(queue),
                    _ => panic!("context read at {}", i.off),
                }
            }
            LDX_W => r[dst] = read(at(r[src]), 4, &stack, &written),
            LDX_H => r[dst] = read(at(r[src]), 2, &stack, &written),
            LDX_B => r[dst] = read(at(r[src]), 1, &stack, &written),
            ST_W | ST_DW | STX_W => {
                assert_eq!(dst, R10 as usize, "stores go to the stack only");
                let n = if i.code == ST_DW { 8 } else { 4 };
                let v = if i.code == STX_W { r[src] } else { imm };
                let off = (at(r[dst]) - (STACK_TOP - STACK_SIZE)) as usize;
                stack[off..off + n].copy_from_slice(&v.to_le_bytes()[..n]);
                written[off..off + n].fill(true);
            }
            ATOMIC_ADD_DW => {
                let k = (at(r[dst]) - PASSED_VALUES) / 8;
                host.passed[k as usize] += r[src];
            }
            JA => step = i.off as isize,
            JEQ_K => step = jump(r[dst] == imm),
            JNE_K => step = jump(r[dst] != imm),
            JNE_X => step = jump(r[dst] != r[src]),
            JGT_X => step = jump(r[dst] > r[src]),
            JNE32_K => step = jump(r[dst] as u32 != i.imm as u32),
            JEQ32_K => step = jump(r[dst] as u32 == i.imm as u32),
            LD_IMM64 => {
                r[dst] = imm;
                step = 1;
            }
            CALL if i.imm == 1 => {
                // bpf_map_lookup_elem(map, key)
                let key = |n: usize| {
                    let off = (r[R2 as usize] - (STACK_TOP - STACK_SIZE)) as usize;
                    assert!(written[off..off + n].iter().all(|&w| w), "an unwritten key");
                    stack[off..off + n].to_vec()
                };
                let map = r[R1 as usize] as i32;
                r[0] = if map == host.maps.settings {
                    let k = u32::from_le_bytes(key(4).try_into().unwrap());
                    if k == 0 {
                        SETTINGS_VALUE
                    } else {
                        0
                    }
                } else if map == host.maps.passed {
                    let k = u32::from_le_bytes(key(4).try_into().unwrap());
                    if (k as usize) < Passed::ALL.len() {
                        PASSED_VALUES + 8 * u64::from(k)
                    } else {
                        0
                    }
                } else if map == host.maps.local {
                    let k: [u8; 16] = key(16).try_into().unwrap();
                    let ip = std::net::Ipv6Addr::from(k);
                    let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
                    if host.local.contains(&ip) {
                        LOCAL_VALUE
                    } else {
                        0
                    }
                } else {
                    panic!("a lookup in map {map}");
                };
            }
            CALL => {
                assert_eq!(
                    r[R1 as usize] as i32, host.maps.xsks,
                    "a redirect to the XSKMAP"
                );
                return Some(r[R2 as usize] as u32);
            }
            EXIT => {
                assert_eq!(r[0], XDP_PASS as u64);
                return None;
            }
            c => panic!("opcode {c:#x}"),
        }
        // A helper call clobbers r1-r5.
        if i.code == CALL {
            r[1..=5].fill(0xdead_0000);
        }
        pc = (pc as isize + 1 + step) as usize;
    }
}
