//! The test allocator (`git_session::alloc_limit`): an allocation over 256 MiB, or one taking the
//! live total over 1 GiB, aborts naming its size — in this test binary, and in the product binary
//! built with the `alloc-limit` feature (as `scripts/test` builds it).

use std::process::Command;

/// Set in a child run of this binary: which allocation to try.
const CHILD: &str = "GIT_SESSION_TEST_ALLOC_CHILD";

/// The child's side of [`this_binary_refuses_allocations_over_the_limits`]: allocate as told.
#[test]
fn allocate_as_the_parent_says() {
    let Ok(what) = std::env::var(CHILD) else {
        return;
    };
    let mut held: Vec<Vec<u8>> = Vec::new();
    match what.as_str() {
        "one-200-mib" => held.push(Vec::with_capacity(200 << 20)),
        "one-300-mib" => held.push(Vec::with_capacity(300 << 20)),
        "five-250-mib" => {
            for _ in 0..5 {
                held.push(Vec::with_capacity(250 << 20));
            }
        }
        other => panic!("unknown allocation {other}"),
    }
    std::hint::black_box(&held);
}

fn child(what: &str) -> std::process::Output {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "alloc_limit::allocate_as_the_parent_says",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, what)
        .output()
        .unwrap()
}

/// A child run of this binary that allocates 300 MiB at once, or 5 × 250 MiB, is aborted with a
/// message naming the size; 200 MiB is admitted.
#[test]
fn this_binary_refuses_allocations_over_the_limits() {
    use std::os::unix::process::ExitStatusExt as _;
    let ok = child("one-200-mib");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (what, words) in [
        (
            "one-300-mib",
            "refused an allocation of 314572800 bytes (over 256 MiB at once",
        ),
        (
            "five-250-mib",
            "refused an allocation of 262144000 bytes (over 1 GiB live in all",
        ),
    ] {
        let out = child(what);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGABRT), "{what}: {stderr}");
        assert!(stderr.contains(words), "{what}: {stderr}");
    }
}

/// The product binary built with the feature aborts on an allocation over 256 MiB: the checkout
/// reads a 300 MiB blob whole (it is under the 512 MiB big-object threshold), which the plain
/// binary restores.
#[cfg(feature = "alloc-limit")]
#[test]
fn the_binary_with_the_feature_refuses_allocations_over_the_limits() {
    use crate::support::{GitServer, World};
    let w = World::new();
    let scratch = w.scratch("big-seed");
    let big = std::fs::File::create(scratch.join("zeros.bin")).unwrap();
    big.set_len(300 << 20).unwrap();
    let tip = w.commit_all(&scratch, "a 300 MiB blob");
    w.serve_scratch(&scratch, "repo.git");
    let srv = GitServer::start(&w.srv(), None);
    let url = srv.url("repo.git", None);
    let run = w.restore_with(&w.path("s"), &url, "s/big", &tip, &["--json"], &[]);
    assert_eq!(run.code, None, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("alloc-limit: refused an allocation of 314572800 bytes"),
        "{}",
        run.stderr
    );
}
