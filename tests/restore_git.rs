//! `restore` over git: the happy path, the lease, reruns, conflicts, faults.

use crate::support::{GitServer, World, userinfo};

#[test]
fn restores_a_non_tip_commit_exactly() {
    let w = World::new();
    let ids = w.repo(
        "repo.git",
        &[
            &[("README.md", Some("one\n")), ("src/lib.rs", Some("fn a() {}\n"))],
            &[("README.md", Some("two\n")), ("bin/run.sh", Some("#!/bin/sh\necho hi\n"))],
            &[("README.md", Some("three\n"))],
        ],
    );
    let srv = GitServer::start(&w.srv(), Some(crate::support::TOKEN));
    let dir = w.path("sandbox");
    let url = srv.url("repo.git", Some(&userinfo()));
    let run = w.run(
        &dir,
        &["restore", "--json"],
        &[("READ_URL", &url), ("SESSION_BRANCH", "sessions/abc"), ("TIP_SHA", &ids[1])],
    );
    run.assert_code(0);
    let j = run.json();
    assert_eq!(j["ok"], true);
    assert_eq!(j["tip"], ids[1].as_str());
    assert_eq!(j["lease"], "0000000000000000000000000000000000000000");
    assert_eq!(w.git(&dir, &["rev-parse", "HEAD"]), ids[1]);
    assert_eq!(w.git(&dir, &["symbolic-ref", "HEAD"]), "refs/heads/sessions/abc");
    assert_eq!(w.git(&dir, &["status", "--porcelain"]), "");
    w.git(&dir, &["fsck"]);
    assert_eq!(std::fs::read_to_string(dir.join("README.md")).unwrap(), "two\n");
}
