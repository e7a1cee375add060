//! `fs::reflink::clone_into` on a file system that clones (XFS with reflink on a loop device: the
//! new file shares the source's extents, the free space does not drop by its size) and on one
//! that does not (the tests' own folder: ext4 or tmpfs, the bytes copied).

use std::fs::File;
use std::io::Write as _;
use std::path::Path;

use git_session::fs::reflink::{Copied, clone_into};

use crate::support::reflink::{Xfs, all_extents_shared};

const SIZE: usize = 64 << 20;

fn content() -> Vec<u8> {
    // Not compressible nor all-zero, so no file system can store it in less than its size.
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    (0..SIZE)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn write_src(path: &Path, bytes: &[u8]) -> File {
    let mut f = File::create(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    File::open(path).unwrap()
}

fn new_dst(path: &Path) -> File {
    File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .unwrap()
}

#[test]
fn clone_into_on_xfs_with_reflink_shares_the_extents() {
    let tmp = tempfile::Builder::new()
        .prefix("gs-reflink-")
        .tempdir()
        .unwrap();
    let Some(xfs) = Xfs::mount(tmp.path()) else {
        return;
    };
    let bytes = content();
    let src = write_src(&xfs.path().join("src"), &bytes);
    let before = xfs.free_bytes();
    let dst = new_dst(&xfs.path().join("dst"));
    assert_eq!(clone_into(&src, &dst, SIZE as u64).unwrap(), Copied::Cloned);
    dst.sync_all().unwrap();
    drop((src, dst));
    let after = xfs.free_bytes();
    assert_eq!(std::fs::read(xfs.path().join("dst")).unwrap(), bytes);
    assert!(
        all_extents_shared(&xfs.path().join("dst")),
        "the clone's extents are not marked shared"
    );
    // A copy would take 64 MiB; the clone takes at most metadata.
    let used = before.saturating_sub(after);
    eprintln!("free space used by the clone of {SIZE} bytes: {used} bytes");
    assert!(
        used < (SIZE as u64) / 16,
        "the clone used {used} bytes of free space"
    );

    // Bytes written on the same file system, for contrast: their extents are their own, and
    // they take their size. (Not `std::io::copy`: its copy_file_range clones on XFS too.)
    let before = xfs.free_bytes();
    write_src(&xfs.path().join("written"), &bytes);
    let used = before.saturating_sub(xfs.free_bytes());
    assert!(
        used >= SIZE as u64,
        "writing {SIZE} bytes used {used} bytes of free space"
    );
    assert!(
        !all_extents_shared(&xfs.path().join("written")),
        "written bytes read as shared"
    );
}

#[test]
fn clone_into_on_xfs_stops_at_len_and_refuses_a_short_source() {
    let tmp = tempfile::Builder::new()
        .prefix("gs-reflink-")
        .tempdir()
        .unwrap();
    let Some(xfs) = Xfs::mount(tmp.path()) else {
        return;
    };
    let bytes = &content()[..1 << 20];
    let src = write_src(&xfs.path().join("src"), bytes);
    // The source grew past what the caller knew: the clone keeps `len` bytes.
    let dst = new_dst(&xfs.path().join("dst"));
    assert_eq!(
        clone_into(&src, &dst, 4096 * 3 + 5).unwrap(),
        Copied::Cloned
    );
    assert_eq!(
        std::fs::read(xfs.path().join("dst")).unwrap(),
        &bytes[..4096 * 3 + 5]
    );
    let dst = new_dst(&xfs.path().join("short"));
    let e = clone_into(&src, &dst, bytes.len() as u64 + 1).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof, "{e}");
}

#[test]
fn clone_into_on_the_tests_file_system_copies_the_bytes() {
    let tmp = tempfile::Builder::new()
        .prefix("gs-reflink-")
        .tempdir()
        .unwrap();
    let bytes = content();
    let src = write_src(&tmp.path().join("src"), &bytes);
    let kind = rustix::fs::fstatfs(&src).unwrap().f_type as i64;
    if ![0xEF53, 0x0102_1994].contains(&kind) {
        eprintln!("skipped: the temporary folder is not on ext4 or tmpfs (f_type {kind:#x})");
        return;
    }
    let dst = new_dst(&tmp.path().join("dst"));
    assert_eq!(clone_into(&src, &dst, SIZE as u64).unwrap(), Copied::Copied);
    drop(dst);
    assert_eq!(std::fs::read(tmp.path().join("dst")).unwrap(), bytes);
}
