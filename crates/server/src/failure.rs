//! What a failed socket call means for a worker. Only an error saying the
//! socket itself is gone may end a worker; everything else an attacker (or
//! a busy host) can provoke per datagram is a counted drop (issue 10,
//! finding 1: one datagram from a broadcast source used to make `sendmmsg`
//! fail with EACCES and stop the whole process).

#[cfg(debug_assertions)]
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::stats::Drop;

/// The verdict on one errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Interrupted, or nothing to read: call again.
    Retry,
    /// The socket is gone (EBADF, ENOTSOCK) or our own buffers are bad
    /// (EFAULT): no later call can succeed, the worker must stop.
    Fatal,
    /// This datagram, or this one call, is lost: count it and go on.
    Drop(Drop),
}

fn fatal(errno: i32) -> bool {
    matches!(errno, libc::EBADF | libc::ENOTSOCK | libc::EFAULT)
}

/// A failed `sendmmsg` for the datagram at the head of the call.
pub fn on_send(errno: Option<i32>) -> Failure {
    let Some(e) = errno else {
        return Failure::Drop(Drop::SendFailed);
    };
    match e {
        libc::EINTR => Failure::Retry,
        e if fatal(e) => Failure::Fatal,
        // A broadcast destination (SO_BROADCAST is off) or a firewall.
        libc::EACCES | libc::EPERM => Failure::Drop(Drop::SendRefused),
        // ICMP errors an attacker can provoke, or no route.
        libc::ECONNREFUSED
        | libc::EHOSTUNREACH
        | libc::ENETUNREACH
        | libc::EHOSTDOWN
        | libc::ENETDOWN
        | libc::ENONET => Failure::Drop(Drop::SendUnreachable),
        // Transient memory pressure: losing this reply is the cheap answer.
        libc::EAGAIN | libc::ENOBUFS | libc::ENOMEM => Failure::Drop(Drop::SendBufferFull),
        _ => Failure::Drop(Drop::SendFailed),
    }
}

/// A failed `recvmmsg`.
pub fn on_receive(errno: Option<i32>) -> Failure {
    match errno {
        Some(libc::EINTR | libc::EAGAIN) => Failure::Retry,
        Some(e) if fatal(e) => Failure::Fatal,
        // ENOMEM, ENOBUFS, a pending socket error: the next call may work.
        _ => Failure::Drop(Drop::ReceiveError),
    }
}

/// How long to pause after `consecutive` receive errors in a row: none for
/// the first (a transient error costs nothing), then 1 ms doubling to at
/// most 100 ms, so a persistent error costs a few wake-ups a second
/// instead of a spinning core, and the worker still notices shutdown and
/// recovery within 100 ms.
pub fn backoff(consecutive: u32) -> Option<Duration> {
    let k = consecutive.checked_sub(2)?;
    let ms = 1u64.checked_shl(k.min(7)).unwrap_or(u64::MAX).min(100);
    Some(Duration::from_millis(ms))
}

/// Receive errors still to inject (debug builds only).
static INJECTED_RECEIVE_ERRORS: AtomicU32 = AtomicU32::new(0);

/// A testing aid, honoured by debug builds only (`gnomon serve` sets it from
/// `GNOMON_TEST_RECEIVE_ERRORS`): the next `n` receives, across all
/// workers, fail with ENOBUFS without reaching the kernel, so a test can
/// watch a real process live through a persistent receive error.
pub fn inject_receive_errors(n: u32) {
    INJECTED_RECEIVE_ERRORS.store(n, Ordering::Relaxed);
}

/// Whether this receive is to fail (see [`inject_receive_errors`]). Always
/// false, and compiled to nothing, in release builds.
#[inline]
pub(crate) fn injected_receive_error() -> bool {
    cfg!(debug_assertions)
        && INJECTED_RECEIVE_ERRORS.load(Ordering::Relaxed) > 0
        && INJECTED_RECEIVE_ERRORS
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok()
}

/// After how many received datagrams a worker stalls; 0: never (debug
/// builds only).
#[cfg(debug_assertions)]
static STALL_AFTER: AtomicU64 = AtomicU64::new(0);
/// Set once a worker has stalled, so only one ever does.
#[cfg(debug_assertions)]
static STALLED: AtomicBool = AtomicBool::new(false);

/// A testing aid that exists in debug builds only (`gnomon serve` sets it
/// from `GNOMON_TEST_WORKER_STALL`): the first UDP worker to have received
/// `n` datagrams stops going round its loop, so a test can watch the
/// watchdog pings stop while the process lives on.
#[cfg(debug_assertions)]
pub fn inject_stall_after(n: u64) {
    STALL_AFTER.store(n, Ordering::Relaxed);
}

/// Whether the worker that has received `received` datagrams is the one
/// to stall now (see [`inject_stall_after`]).
#[cfg(debug_assertions)]
pub(crate) fn stall_due(received: u64) -> bool {
    let n = STALL_AFTER.load(Ordering::Relaxed);
    n > 0
        && received >= n
        && STALLED
            .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gone_socket_is_fatal() {
        for e in [libc::EBADF, libc::ENOTSOCK, libc::EFAULT] {
            assert_eq!(on_send(Some(e)), Failure::Fatal, "send errno {e}");
            assert_eq!(on_receive(Some(e)), Failure::Fatal, "receive errno {e}");
        }
        // Everything else, including what the old code treated as fatal.
        for (e, why) in [
            (libc::EACCES, Drop::SendRefused),
            (libc::EPERM, Drop::SendRefused),
            (libc::ECONNREFUSED, Drop::SendUnreachable),
            (libc::EHOSTUNREACH, Drop::SendUnreachable),
            (libc::ENETUNREACH, Drop::SendUnreachable),
            (libc::ENETDOWN, Drop::SendUnreachable),
            (libc::EAGAIN, Drop::SendBufferFull),
            (libc::ENOBUFS, Drop::SendBufferFull),
            (libc::ENOMEM, Drop::SendBufferFull),
            (libc::EINVAL, Drop::SendFailed),
            (libc::EMSGSIZE, Drop::SendFailed),
            (libc::EADDRNOTAVAIL, Drop::SendFailed),
            (libc::EAFNOSUPPORT, Drop::SendFailed),
            (libc::EIO, Drop::SendFailed),
        ] {
            assert_eq!(on_send(Some(e)), Failure::Drop(why), "send errno {e}");
        }
        assert_eq!(on_send(None), Failure::Drop(Drop::SendFailed));
        assert_eq!(on_send(Some(libc::EINTR)), Failure::Retry);
        for e in [
            libc::ENOMEM,
            libc::ENOBUFS,
            libc::EINVAL,
            libc::ECONNREFUSED,
            libc::EIO,
        ] {
            assert_eq!(
                on_receive(Some(e)),
                Failure::Drop(Drop::ReceiveError),
                "receive errno {e}"
            );
        }
        assert_eq!(on_receive(None), Failure::Drop(Drop::ReceiveError));
        assert_eq!(on_receive(Some(libc::EINTR)), Failure::Retry);
        assert_eq!(on_receive(Some(libc::EAGAIN)), Failure::Retry);
    }

    #[test]
    fn backoff_is_bounded_and_grows() {
        assert_eq!(backoff(0), None);
        assert_eq!(backoff(1), None);
        assert_eq!(backoff(2), Some(Duration::from_millis(1)));
        assert_eq!(backoff(3), Some(Duration::from_millis(2)));
        assert_eq!(backoff(9), Some(Duration::from_millis(100)));
        assert_eq!(backoff(u32::MAX), Some(Duration::from_millis(100)));
    }
}
