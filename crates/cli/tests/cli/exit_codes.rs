//! The exit statuses: one table (gnomon::exit) that the documentation
//! repeats and every command returns from, and the status of a port that
//! is already taken, the same for every command that listens.

use std::net::{TcpListener, UdpSocket};
use std::process::Output;

fn gnomon(args: &[&str]) -> Output {
    gnomon_testkit::command(env!("CARGO_BIN_EXE_gnomon"))
        .args(args)
        .env_remove("GNOMON_CONFIG")
        .output()
        .unwrap()
}

/// docs/EXIT-CODES.md holds the table row for row: code, commands and
/// meaning, in the table's order. A code added to the program without the
/// document (or the reverse) fails here.
#[test]
fn the_documented_table_is_the_programs_table() {
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/EXIT-CODES.md"
    ))
    .unwrap();
    let rows: Vec<(u8, String, String)> = doc
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l
                .trim()
                .strip_prefix('|')?
                .strip_suffix('|')?
                .split(" | ")
                .collect();
            let [code, commands, meaning] = cells[..] else {
                return None;
            };
            let code = code.trim().parse().ok()?;
            Some((code, commands.trim().to_owned(), meaning.trim().to_owned()))
        })
        .collect();
    let table: Vec<(u8, String, String)> = gnomon::exit::TABLE
        .iter()
        .map(|s| (s.code, s.commands.to_owned(), s.meaning.to_owned()))
        .collect();
    assert_eq!(rows, table);
    // Distinct and sorted, so a reader finds a code where expected.
    assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "{table:?}");
}

/// Each listening command, on a port something else holds: EX_OSERR (71)
/// and a sentence naming the address, and nothing made on the way out
/// (serve prints no key nobody could use; the report server creates no
/// database).
#[test]
fn a_port_in_use_is_71_for_every_command_that_listens() {
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_tcp = tcp.local_addr().unwrap().to_string();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    let taken_udp = udp.local_addr().unwrap().to_string();
    let dir = std::env::temp_dir().join(format!("gnomon-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let list = dir.join("list.json");
    std::fs::write(
        &list,
        r#"{"servers":[{"name":"a","version":1,"publicKeyType":"ed25519",
            "publicKey":"iBVjxg/1j7y1+kQUTBYdTabxCppesU/07D4PMDJk2WA=",
            "addresses":[{"protocol":"udp","address":"127.0.0.1:9"}]}]}"#,
    )
    .unwrap();
    let db = dir.join("reports.db");
    let database = format!("sqlite:{}", db.display());
    let runs: [(&str, Vec<&str>); 4] = [
        (
            "serve",
            vec!["serve", "--listen", &taken_udp, "--summary-interval", "0"],
        ),
        (
            "watch",
            vec![
                "watch",
                "--servers",
                list.to_str().unwrap(),
                "--listen",
                &taken_tcp,
            ],
        ),
        (
            "report-server",
            vec![
                "report-server",
                "--listen",
                &taken_tcp,
                "--database",
                &database,
            ],
        ),
        (
            "bench null-server",
            vec![
                "bench",
                "null-server",
                "--listen",
                &taken_udp,
                "--duration",
                "5s",
            ],
        ),
    ];
    for (what, args) in runs {
        let out = gnomon(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(71), "{what}: {err}");
        assert!(err.to_lowercase().contains("in use"), "{what}: {err}");
        if what == "serve" {
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                "",
                "serve announced a key it never served"
            );
        }
    }
    assert!(!db.exists(), "report-server created its database first");
    std::fs::remove_dir_all(&dir).unwrap();
}
