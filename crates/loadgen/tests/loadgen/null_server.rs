//! The do-nothing responder, and the load generator's any-reply mode
//! against it.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gnomon_loadgen::{run, Backend, LoadConfig, Mode, NullConfig, NullServer};
use gnomon_protocol::Profile;

fn start(workers: usize, reply_size: usize) -> (std::net::SocketAddr, NullServer) {
    let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.reply_size = reply_size;
    cfg.workers = workers;
    cfg.duration = Some(Duration::from_secs(30));
    let server = NullServer::bind(&cfg).expect("bind");
    (server.local_addr().unwrap(), server)
}

#[test]
fn every_datagram_gets_the_fixed_reply() {
    let (addr, server) = start(2, 100);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop));
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.connect(addr).unwrap();
        let mut buf = [0u8; 2048];
        let mut first = None;
        for i in 0..50u8 {
            c.send(&[i; 1024]).unwrap();
            let n = c.recv(&mut buf).expect("reply");
            assert_eq!(n, 100);
            match &first {
                None => first = Some(buf[..n].to_vec()),
                Some(f) => assert_eq!(&buf[..n], &f[..], "replies are identical"),
            }
        }
        stop.store(true, Ordering::Relaxed);
        let st = h.join().unwrap();
        assert_eq!(st.received, 50);
        assert_eq!(st.replied, 50);
        assert!(st.cpu_us_per_reply().is_some());
    });
}

#[test]
fn bad_reply_sizes_are_refused() {
    for size in [0, 70_000] {
        let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.reply_size = size;
        let e = NullServer::bind(&cfg).unwrap_err();
        assert!(e.to_string().contains("--reply-size"), "{e}");
    }
}

#[test]
fn any_reply_mode_measures_the_null_server() {
    let (addr, server) = start(1, 400);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop));
        let mut cfg = LoadConfig::new(addr.to_string(), [0; 32], Profile::rfc());
        cfg.any_reply = true;
        cfg.mode = Mode::Max;
        cfg.window = Some(16);
        cfg.workers = 2;
        cfg.count = Some(3000);
        cfg.duration = Duration::from_secs(20);
        let rep = run(&cfg, &AtomicBool::new(false)).expect("run");
        stop.store(true, Ordering::Relaxed);
        let st = h.join().unwrap();
        assert_eq!(rep.sent, 3000, "{rep:?}");
        assert_eq!(rep.answered, 3000, "{rep:?}");
        assert_eq!(rep.verified, 0);
        assert_eq!(rep.unmatched, 0);
        assert_eq!(st.replied, 3000);
    });
}

/// Send `total` datagrams in windows of `window` and check that every one
/// gets the fixed reply of `reply_size` bytes. Each receive is bounded by a
/// timeout, so a lost reply fails the test rather than hanging it.
fn exchange(addr: std::net::SocketAddr, total: usize, window: usize, reply_size: usize) {
    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.connect(addr).unwrap();
    let expected: Vec<u8> = b"gnomon null reply "
        .iter()
        .copied()
        .cycle()
        .take(reply_size)
        .collect();
    let mut buf = [0u8; 2048];
    let mut done = 0;
    while done < total {
        let k = window.min(total - done);
        for i in 0..k {
            c.send(&[(done + i) as u8; 1024]).unwrap();
        }
        for _ in 0..k {
            let n = c.recv(&mut buf).expect("reply within 5 s");
            assert_eq!(&buf[..n], &expected[..]);
        }
        done += k;
    }
}

#[test]
fn io_uring_backend_answers_every_datagram_or_says_why_not() {
    let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::IoUring;
    cfg.reply_size = 416;
    cfg.workers = 2;
    cfg.duration = Some(Duration::from_secs(30));
    let server = match NullServer::bind(&cfg) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported => {
            let msg = e.to_string();
            assert!(msg.contains("io_uring is unavailable"), "{msg}");
            assert!(msg.contains("--backend recvmmsg"), "{msg}");
            eprintln!("case run: io_uring unavailable here, checked the error: {msg}");
            return;
        }
        Err(e) => panic!("bind: {e}"),
    };
    eprintln!("case run: io_uring available, checked the replies");
    let addr = server.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop));
        // One at a time, then bursts of 50 (what the client's default
        // receive buffer holds without drops): 2,050 datagrams in all, so
        // each of the 256 provided buffers is used and given back several
        // times over.
        exchange(addr, 50, 1, 416);
        exchange(addr, 2000, 50, 416);
        stop.store(true, Ordering::Relaxed);
        let st = h.join().unwrap();
        assert_eq!(st.received, 2050);
        assert_eq!(st.replied, 2050);
        assert!(st.cpu_us_per_reply().is_some());
    });
}

#[test]
fn io_uring_backend_stops_on_its_duration() {
    let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::IoUring;
    cfg.duration = Some(Duration::from_millis(200));
    match NullServer::bind(&cfg) {
        Ok(server) => {
            let t = std::time::Instant::now();
            let st = server.run(&AtomicBool::new(false));
            assert_eq!(st.received, 0);
            assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
            eprintln!("case run: io_uring available, stopped on time");
        }
        Err(e) => {
            assert_eq!(e.kind(), std::io::ErrorKind::Unsupported, "{e}");
            eprintln!("case run: io_uring unavailable here: {e}");
        }
    }
}

#[test]
fn busy_poll_is_set_or_refused_with_the_reason() {
    let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.busy_poll = Some(50);
    cfg.reply_size = 100;
    cfg.duration = Some(Duration::from_secs(30));
    let server = match NullServer::bind(&cfg) {
        Ok(s) => s,
        // Above net.core.busy_read, SO_BUSY_POLL needs CAP_NET_ADMIN.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            assert!(e.to_string().contains("SO_BUSY_POLL"), "{e}");
            eprintln!("case run: not permitted here, checked the error: {e}");
            return;
        }
        Err(e) => panic!("bind: {e}"),
    };
    eprintln!("case run: SO_BUSY_POLL set, checked the replies");
    let addr = server.local_addr().unwrap();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let h = s.spawn(|| server.run(&stop));
        exchange(addr, 100, 10, 100);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(h.join().unwrap().replied, 100);
    });
}

#[test]
fn busy_poll_is_refused_with_io_uring() {
    let mut cfg = NullConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.backend = Backend::IoUring;
    cfg.busy_poll = Some(50);
    let e = NullServer::bind(&cfg).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("--busy-poll"), "{e}");
}

#[test]
fn backend_names_parse() {
    assert_eq!("recvmmsg".parse(), Ok(Backend::Recvmmsg));
    assert_eq!("io-uring".parse(), Ok(Backend::IoUring));
    assert_eq!(Backend::IoUring.to_string(), "io-uring");
    assert!("epoll".parse::<Backend>().is_err());
}
