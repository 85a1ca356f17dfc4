//! The documents say the defaults the program prints: the tables of keys
//! and defaults in docs/SYNC.md, docs/NOW.md, docs/WATCH.md and
//! docs/OPERATIONS.md, and the commented files of deploy/.

use super::{
    is_a_value, known, repo, report_server_defaults, says, serve_defaults, sync_defaults,
    watch_defaults, Defaults, Known,
};

/// One row of a Markdown table: its cells, trimmed.
fn cells(line: &str) -> Option<Vec<String>> {
    let inner = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    // `\|` inside a cell is text, not a border.
    let mut out = vec![String::new()];
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                out.last_mut().unwrap().push('|');
                chars.next();
            }
            '|' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    Some(out.into_iter().map(|c| c.trim().to_owned()).collect())
}

/// The rows under the table whose header row is `header`: (keys, default
/// cell) for each, with the keys of a cell such as "`timeout`, `retries`"
/// or "`--workers N`" as names (`timeout`, `workers`).
fn rows(doc: &str, file: &str, header: &str) -> Vec<(Vec<String>, String)> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != header);
    let head = cells(
        lines
            .next()
            .unwrap_or_else(|| panic!("{file} lost its table `{header}`")),
    )
    .unwrap();
    let col = head.iter().position(|c| c == "default").unwrap();
    lines
        .skip(1)
        .map_while(cells)
        .map(|row| {
            let keys = row[0]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|k| {
                    let k = k.trim_start_matches("--");
                    k.split(' ').next().unwrap().to_owned()
                })
                .collect();
            (keys, row[col].clone())
        })
        .collect()
}

/// Each row's default is the program's: one default per key (a row of
/// several keys lists theirs in order, separated by commas); a key the
/// program does not have fails, a default in words is not compared.
fn hold(file: &str, header: &str, lookup: &dyn Fn(&str) -> Known) -> usize {
    let doc = std::fs::read_to_string(repo().join(file)).unwrap();
    let mut compared = 0;
    for (keys, default) in rows(&doc, file, header) {
        let said: Vec<String> = if keys.len() == 1 {
            vec![default.clone()]
        } else {
            default.split(", ").map(str::to_owned).collect()
        };
        for (i, key) in keys.iter().enumerate() {
            match lookup(key) {
                Known::Unknown => panic!("{file}: `{key}` is not a key of the program"),
                Known::Unset => {}
                Known::Value(v) => {
                    let said = said.get(i).map_or("", String::as_str);
                    assert!(
                        says(said, &v),
                        "{file}: `{key}` defaults to {v} (as the program prints it), the table \
                         says {default:?}"
                    );
                    compared += 1;
                }
            }
        }
    }
    compared
}

fn names(d: &Defaults, more: &[&str]) -> Vec<String> {
    d.keys()
        .cloned()
        .chain(more.iter().map(|s| (*s).to_owned()))
        .collect()
}

/// The case again: docs/SYNC.md said `chrony-max-radius` was 3 s.
#[test]
fn the_docs_tables_say_the_defaults_the_program_prints() {
    let sync = sync_defaults();
    let sync_keys: Vec<String> = gnomon_sync::config::KEYS
        .iter()
        .map(|k| k.0.to_owned())
        .collect();
    let s = |k: &str| known(&sync, &sync_keys, k);
    assert!(hold("docs/SYNC.md", "| key / flag | default | meaning |", &s) >= 15);
    assert!(
        hold(
            "docs/NOW.md",
            "| key (`[sync]`) | flag / variable | default | |",
            &s
        ) >= 3
    );

    let watch = watch_defaults();
    let watch_keys = names(&watch, &["servers", "listen", "database"]);
    let w = |k: &str| known(&watch, &watch_keys, k);
    assert!(hold("docs/WATCH.md", "| `[watch]` key | default | range |", &w) >= 8);
    let sink = report_server_defaults();
    let sink_keys = names(&sink, &["accept-keys"]);
    let r = |k: &str| known(&sink, &sink_keys, k);
    assert!(
        hold(
            "docs/WATCH.md",
            "| flag | variable | default | meaning |",
            &r
        ) >= 8
    );

    let serve = serve_defaults();
    let serve_keys = names(&serve, &[]);
    for (table, header) in [
        ("tcp", "| key | default | what it bounds |"),
        ("limit", "| key | default | what it does | counted as |"),
    ] {
        let t = |k: &str| known(&serve, &serve_keys, &format!("{table}.{k}"));
        assert!(hold("docs/OPERATIONS.md", header, &t) >= 6, "[{table}]");
    }

    // The bench tables: clap holds those defaults.
    let mut cli = gnomon::command();
    cli.build();
    let bench = cli.find_subcommand("bench").unwrap();
    for (sub, header) in [
        ("load", "| option | default | range |"),
        ("null-server", "| option | default | |"),
    ] {
        let cmd = bench.find_subcommand(sub).unwrap();
        let c = |k: &str| match cmd.get_arguments().find(|a| a.get_long() == Some(k)) {
            // A switch is off unless given: the table says "off".
            Some(a) if a.get_action().takes_values() => match a.get_default_values().first() {
                Some(d) => Known::Value(toml::Value::String(d.to_string_lossy().into())),
                None => Known::Unset,
            },
            // Renamed or a switch: the names are another test's to hold.
            _ => Known::Unset,
        };
        assert!(hold("docs/OPERATIONS.md", header, &c) >= 4, "bench {sub}");
    }
}

/// What a deploy file says of one key: the line (set or shown commented
/// out) and the `Default …` sentence of the comment above it, if any.
struct Said {
    key: String,
    value: String,
    default: Option<String>,
}

/// Every key line of a commented TOML file, with its table's name in
/// front (`tcp.max-connections`). A comment block's `Default X` goes to
/// the key line after it; `Defaults X, Y` (or `X and Y`) to the lines
/// after it, in order.
fn key_lines(text: &str) -> Vec<Said> {
    let (mut table, mut block, mut pending) = (String::new(), String::new(), Vec::new());
    let mut out = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            table = format!("{name}.");
            block.clear();
            continue;
        }
        let bare = line.trim_start_matches(['#', ' ']);
        let key_line = bare.split_once(" = ").filter(|(k, _)| {
            !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '-')
        });
        match key_line {
            Some((k, v)) => {
                if !block.is_empty() {
                    pending = defaults_in(&block);
                    block.clear();
                }
                let default = (!pending.is_empty()).then(|| pending.remove(0));
                out.push(Said {
                    key: format!("{table}{k}"),
                    value: v.trim().to_owned(),
                    default,
                });
            }
            None if line.starts_with('#') => {
                block.push(' ');
                block.push_str(bare);
            }
            None => {
                block.clear();
                pending.clear();
            }
        }
    }
    out
}

/// The defaults a comment states: after `Default ` or `Default: ` one,
/// after `Defaults ` several.
fn defaults_in(block: &str) -> Vec<String> {
    let sentence = |rest: &str| -> String {
        // Up to the end of the sentence, a quoted or bracketed dot aside.
        let mut depth = 0i32;
        let mut quoted = false;
        let chars: Vec<char> = rest.chars().collect();
        let mut end = chars.len();
        for (i, &c) in chars.iter().enumerate() {
            match c {
                '"' => quoted = !quoted,
                '[' | '(' if !quoted => depth += 1,
                ']' | ')' if !quoted => depth -= 1,
                '.' if !quoted && depth == 0 && chars.get(i + 1).is_none_or(|n| *n == ' ') => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        chars[..end].iter().collect::<String>().trim().to_owned()
    };
    if let Some((_, rest)) = block.split_once("Defaults ") {
        let s = sentence(rest);
        let parts: Vec<&str> = if s.contains(" and ") {
            s.split(" and ").collect()
        } else {
            s.split(", ").collect()
        };
        return parts.into_iter().map(str::to_owned).collect();
    }
    match block
        .split_once("Default: ")
        .or_else(|| block.split_once("Default "))
    {
        Some((_, rest)) => vec![sentence(rest)],
        None => Vec::new(),
    }
}

/// Each key of a deploy file whose default is a value: its `Default …`
/// sentence says that default, or, without one, the line itself sets it
/// (a file whose header promises "every key, with its default" may set
/// another value only where it says what the default is).
fn hold_file(file: &str, defaults: &dyn Fn(&str) -> Option<toml::Value>) -> usize {
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let mut compared = 0;
    for said in key_lines(&text) {
        let Some(v) = defaults(&said.key) else {
            continue;
        };
        let (what, text) = match &said.default {
            Some(d) if !is_a_value(d) => continue,
            // A default that depends on the rest of the file is said so.
            Some(d) if d.contains(" when ") => continue,
            Some(d) => ("its comment says Default", d.as_str()),
            None => ("it is set to", said.value.as_str()),
        };
        assert!(
            says(text, &v),
            "{file}: `{}` defaults to {v} (as the program prints it); {what} {text}",
            said.key
        );
        compared += 1;
    }
    compared
}

#[test]
fn the_deploy_files_say_the_defaults_the_program_prints() {
    let sync = sync_defaults();
    let n = hold_file("deploy/gnomon-sync.toml", &|k| {
        sync.get(k.strip_prefix("sync.")?).cloned()
    });
    assert_eq!(
        n,
        sync.len(),
        "deploy/gnomon-sync.toml lacks some of {sync:?}"
    );

    let watch = watch_defaults();
    let sink = report_server_defaults();
    let n = hold_file("deploy/gnomon-watch.toml", &|k| {
        if let Some(k) = k.strip_prefix("watch.") {
            return watch.get(k).cloned();
        }
        sink.get(k.strip_prefix("report-server.")?).cloned()
    });
    assert_eq!(n, watch.len() + sink.len(), "deploy/gnomon-watch.toml");

    let serve = serve_defaults();
    let n = hold_file("deploy/gnomon.toml", &|k| serve.get(k).cloned());
    assert!(n >= 30, "deploy/gnomon.toml: {n} defaults compared");
}
