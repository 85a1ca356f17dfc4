//! Write gnomon's conformance corpus: `cargo run -p gnomon-protocol --example
//! gen_corpus -- tests/vectors` (from the repository root). The generator
//! lives in `tests/protocol/corpus_gen/` so that `tests/protocol/corpus.rs` can check the
//! committed files against it; see `tests/vectors/README.md`.

use std::path::PathBuf;
use std::process::ExitCode;

#[path = "../tests/protocol/corpus_gen/mod.rs"]
mod corpus_gen;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen_corpus <output directory>");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("{}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    let mut total = 0;
    for (name, text) in corpus_gen::generate() {
        let path = dir.join(&name);
        if let Err(e) = std::fs::write(&path, &text) {
            eprintln!("{}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        total += text.len();
        println!("{:>8}  {name}", text.len());
    }
    println!("{total:>8}  total");
    ExitCode::SUCCESS
}
