//! A reply the kernel refuses is a counted drop, never the end of a worker
//! (issue 10, finding 1), shown on the real send path: a datagram forged
//! from a broadcast source is received, answered into a batch together with
//! an ordinary client's, and sent. The source filter would drop it before
//! any reply is built; here the filter is not involved, as for a directed
//! broadcast the filter has not learnt yet.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use gnomon_server::stats::{Drop, WorkerStats};
use gnomon_server::sys::{self, Batch};

#[test]
fn a_refused_reply_is_counted_and_the_rest_of_the_batch_is_sent() {
    let test = "send_errors::a_refused_reply_is_counted_and_the_rest_of_the_batch_is_sent";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(test, "raw sockets need root");
        return;
    }
    let server = sys::udp_socket(
        "127.0.0.1:0".parse().unwrap(),
        None,
        Duration::from_millis(100),
    )
    .unwrap();
    let to: SocketAddr = server.local_addr().unwrap().as_socket().unwrap();
    let broadcast: SocketAddr = "127.255.255.255:2000".parse().unwrap();
    gnomon_testkit::raw::spoof(broadcast, to, b"from a broadcast address").unwrap();
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    client.send_to(b"from a client", to).unwrap();

    let mut batch = Batch::new(8);
    let fd = server.as_raw_fd();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got < 2 {
        assert!(Instant::now() < deadline, "only {got} datagrams arrived");
        got += if got == 0 {
            batch.recv(fd).unwrap()
        } else {
            batch.recv_more(fd, got).unwrap()
        };
    }
    let froms: Vec<SocketAddr> = (0..2).map(|i| batch.meta(i).from).collect();
    assert_eq!(froms[0], broadcast, "the kernel delivers the forged source");
    // Echo both, the refused reply first so the good one follows it in the
    // same sendmmsg.
    let count = {
        let (received, mut replies) = batch.split();
        for k in 0..2 {
            let d = received.datagram(k);
            replies.slot(k)[..d.len()].copy_from_slice(d);
            replies.commit(k, k, d.len());
        }
        replies.count()
    };
    let mut stats = WorkerStats::default();
    let sent = batch
        .send(fd, count, &mut stats)
        .expect("a refused reply is not a socket failure");
    assert_eq!(sent, 1);
    assert_eq!(stats.drops[Drop::SendRefused as usize], 1);
    assert_eq!(stats.drops.iter().sum::<u64>(), 1);
    let mut buf = [0u8; 64];
    let n = client.recv(&mut buf).expect("the client's reply was sent");
    assert_eq!(&buf[..n], b"from a client");
}

#[test]
fn a_reply_to_the_unspecified_address_is_never_sent() {
    // The kernel turns a destination of `::` into ::1: a forged `::`
    // source would make the server answer itself, or whatever listens on
    // ::1 at that port. The worker drops such sources before parsing; the
    // send path refuses them too, shown here without the worker.
    let test = "send_errors::a_reply_to_the_unspecified_address_is_never_sent";
    if !gnomon_testkit::is_root() {
        gnomon_testkit::skip(test, "raw sockets need root");
        return;
    }
    let server =
        sys::udp_socket("[::1]:0".parse().unwrap(), None, Duration::from_millis(100)).unwrap();
    let to: SocketAddr = server.local_addr().unwrap().as_socket().unwrap();
    let listener = UdpSocket::bind("[::1]:0").unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let unspecified = SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, port));
    gnomon_testkit::raw::spoof(unspecified, to, b"from ::").unwrap();
    let mut batch = Batch::new(4);
    let fd = server.as_raw_fd();
    let deadline = Instant::now() + Duration::from_secs(10);
    while batch.recv(fd).unwrap() == 0 {
        assert!(
            Instant::now() < deadline,
            "the forged datagram never arrived"
        );
    }
    assert_eq!(batch.meta(0).from, unspecified);
    {
        let (_, mut replies) = batch.split();
        replies.slot(0)[..8].copy_from_slice(b"reply ::");
        replies.commit(0, 0, 8);
    }
    let mut stats = WorkerStats::default();
    assert_eq!(batch.send(fd, 1, &mut stats).unwrap(), 0);
    assert_eq!(stats.drops[Drop::SourceUnspecified as usize], 1);
    // A marker sent afterwards on the same path arrives first: nothing was
    // sent before it.
    server
        .send_to(b"marker", &listener.local_addr().unwrap().into())
        .unwrap();
    let mut buf = [0u8; 64];
    let n = listener.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"marker");
}
