//! Local faults that are not bugs end as exit 10 (the system refused: `io`) or 7 (local state in
//! the way: `conflict`) with their true story, never exit 1 (`internal`, a bug of git-session).

use std::path::Path;

use crate::support::real_repo::git_archive;
use crate::support::{Run, World};

/// A scratch repository of two files, its commit and a `git archive` of it with the usual
/// prefix.
fn archived(w: &World) -> (String, std::path::PathBuf) {
    let scratch = w.scratch("faults");
    std::fs::write(scratch.join("a.txt"), "a\n").unwrap();
    std::fs::create_dir_all(scratch.join("d")).unwrap();
    std::fs::write(scratch.join("d/b.txt"), "b\n").unwrap();
    let tip = w.commit_all(&scratch, "one");
    let prefix = format!("repo-{}/", &tip[..12]);
    let archive = git_archive(w, &scratch, &tip, Some(&prefix), "faults.tar.gz");
    (tip, archive)
}

fn restore(w: &World, target: &Path, tip: &str, archive: &Path) -> Run {
    let argv = [
        "restore",
        "--json",
        "--archive",
        archive.to_str().unwrap(),
        "-C",
        target.to_str().unwrap(),
    ];
    w.run(
        &w.path(""),
        &argv,
        &[("SESSION_BRANCH", "sessions/faults"), ("TIP_SHA", tip)],
    )
}

#[track_caller]
fn assert_kind(run: &Run, code: i32, kind: &str, words: &[&str]) {
    run.assert_says(code, words);
    assert_eq!(run.json()["error"]["kind"], kind, "{}", run.stdout);
}

/// A symlink loop on the target's path (ELOOP) and a folder name longer than the file system
/// holds (ENAMETOOLONG): exit 10 naming the path and what the system said (both were exit 1,
/// "internal"); nothing is created.
#[test]
fn faults_on_the_target_s_path_are_exit_10() {
    let w = World::new();
    let (tip, archive) = archived(&w);
    let looped = w.path("loop");
    std::os::unix::fs::symlink(&looped, &looped).unwrap();
    let run = restore(&w, &looped.join("t"), &tip, &archive);
    assert_kind(&run, 10, "io", &["loop/t", "symbolic links"]);

    let long = w.path(&"n".repeat(300));
    let run = restore(&w, &long, &tip, &archive);
    assert_kind(&run, 10, "io", &["too long", "a shorter path"]);
    assert!(std::fs::symlink_metadata(&long).is_err());
}

/// A session record changed into something git-session never writes is local state: exit 7
/// saying how to recover (was exit 1). So is a baked template's `.git/shallow` holding a line
/// that is no object id.
#[test]
fn malformed_local_records_are_exit_7() {
    let w = World::new();
    let (tip, archive) = archived(&w);
    let target = w.path("t");
    restore(&w, &target, &tip, &archive).assert_code(0);
    std::fs::write(target.join(".git/git-session.json"), "{ not json\n").unwrap();
    let run = w.run(&target, &["status", "--json"], &[]);
    assert_kind(
        &run,
        7,
        "conflict",
        &["git-session.json", "restore the session again"],
    );

    let b = crate::bake::Baked::new();
    let dir = b.w.path("baked");
    b.bake(&dir).assert_code(0);
    std::fs::write(dir.join(".git/shallow"), "not an id\n").unwrap();
    let run = b.boot(&dir, &[], &[]);
    assert_kind(
        &run,
        7,
        "conflict",
        &[".git/shallow", "bake the template again"],
    );
}
