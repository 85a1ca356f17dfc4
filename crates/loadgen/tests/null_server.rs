//! The do-nothing responder, and the load generator's any-reply mode
//! against it.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use gnomon_loadgen::{run, LoadConfig, Mode, NullConfig, NullServer};
use gnomon_protocol::Profile;

fn start(workers: usize, reply_size: usize) -> (std::net::SocketAddr, NullServer) {
    let server = NullServer::bind(&NullConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        reply_size,
        workers,
        duration: Some(Duration::from_secs(30)),
    })
    .expect("bind");
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
        let e = NullServer::bind(&NullConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            reply_size: size,
            workers: 1,
            duration: None,
        })
        .unwrap_err();
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
