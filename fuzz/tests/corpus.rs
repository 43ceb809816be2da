//! Every committed input under `corpus/<target>/` (the seeds and every
//! input a fuzzer found a bug with) through its target, as an ordinary
//! test: a regression is caught without a fuzzing engine.

use std::path::Path;

#[test]
fn every_corpus_input_passes_its_target() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut total = 0;
    for (name, target) in tollgate_fuzz::targets() {
        let dir = root.join(name);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "{name}: no corpus");
        for f in &files {
            let data = std::fs::read(f).expect("corpus file");
            let run = std::panic::catch_unwind(|| target(&data));
            assert!(run.is_ok(), "{name}: {} fails", f.display());
            total += 1;
        }
    }
    eprintln!("{total} corpus inputs passed");
}
