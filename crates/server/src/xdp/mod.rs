//! The AF_XDP datapath: requests taken off the NIC's receive ring as raw
//! Ethernet frames and answered by rewriting each frame in place into its
//! reply, bypassing the kernel's UDP stack.

pub mod frame;
