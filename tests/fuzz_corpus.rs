//! The committed fuzz corpus (`fuzz/corpus/<target>/`, see `scripts/fuzz`) replayed through the
//! targets' own functions ([`git_session::fuzzing`]) on the stable toolchain: every input kept
//! there, regression inputs of bugs the fuzzers found included, runs with `cargo test`.

use std::path::{Path, PathBuf};

use git_session::fuzzing::TARGETS;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")
}

/// Every input of `target`'s corpus, through its function; a panic names the input.
fn replay(target: &str) {
    let (_, run) = TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("a target of git_session::fuzzing");
    let mut inputs: Vec<PathBuf> = std::fs::read_dir(corpus().join(target))
        .expect("the target's corpus folder")
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{target} has no corpus");
    for input in inputs {
        let data = std::fs::read(&input).expect("a corpus input");
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!("{target} fails on {}", input.display());
        }
    }
}

#[test]
fn every_target_has_a_corpus_and_every_corpus_a_target() {
    let mut folders: Vec<String> = std::fs::read_dir(corpus())
        .expect("fuzz/corpus")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    folders.sort();
    let mut targets: Vec<String> = TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    targets.sort();
    assert_eq!(folders, targets);
    let manifest =
        std::fs::read_to_string(corpus().join("../Cargo.toml")).expect("fuzz/Cargo.toml");
    for target in &targets {
        assert!(
            manifest.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml has no target {target}"
        );
    }
}

#[test]
fn upload_pack() {
    replay("upload_pack");
}

#[test]
fn receive_pack() {
    replay("receive_pack");
}

#[test]
fn pack() {
    replay("pack");
}

#[test]
fn delta() {
    replay("delta");
}

#[test]
fn tree() {
    replay("tree");
}

#[test]
fn names() {
    replay("names");
}

#[test]
fn tar() {
    replay("tar");
}

#[test]
fn state() {
    replay("state");
}

#[test]
fn inputs() {
    replay("inputs");
}

#[test]
fn credential() {
    replay("credential");
}

#[test]
fn prepush() {
    replay("prepush");
}

#[test]
fn terminal() {
    replay("terminal");
}

#[test]
fn signing() {
    replay("signing");
}

#[test]
fn manifest() {
    replay("manifest");
}
