//! An XFS file system with reflink on a loop device, mounted in the test's own folder, for the
//! copy-on-write tests (ext4 and tmpfs, where the tests run, cannot clone). Needs root and
//! `mkfs.xfs` (xfsprogs; `scripts/test` and `scripts/peers` install it): as root a failure to make
//! or mount it fails the test (CI runs as root, so there it must run); without root the test says
//! it was skipped.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::is_root;

/// The mounted file system; unmounted on drop (also when the test panics), which frees the loop
/// device (`mount -o loop` sets autoclear). The image stays in the test's folder, deleted with it.
pub struct Xfs {
    dir: PathBuf,
}

impl Xfs {
    /// A 512 MiB (sparse) image `xfs.img` in `folder`, made with `-m reflink=1` and mounted on
    /// `folder/xfs`; `None` (said) when not root.
    pub fn mount(folder: &Path) -> Option<Self> {
        if !is_root() {
            eprintln!("skipped: mounting an XFS loop device for the reflink test needs root");
            return None;
        }
        let img = folder.join("xfs.img");
        let dir = folder.join("xfs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::File::create(&img)
            .and_then(|f| f.set_len(512 << 20))
            .unwrap();
        run(
            Command::new("mkfs.xfs")
                .args(["-q", "-m", "reflink=1"])
                .arg(&img),
            "mkfs.xfs (install xfsprogs; scripts/test does)",
        );
        run(
            Command::new("mount")
                .args(["-o", "loop"])
                .arg(&img)
                .arg(&dir),
            "mount -o loop of the XFS image",
        );
        Some(Xfs { dir })
    }

    /// The mounted folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Bytes the file system has free (`statvfs`: blocks free × fragment size), after a sync so
    /// delayed allocation has been counted.
    pub fn free_bytes(&self) -> u64 {
        let f = std::fs::File::open(&self.dir).unwrap();
        f.sync_all().unwrap();
        rustix::fs::sync();
        let st = rustix::fs::fstatvfs(&f).unwrap();
        st.f_bfree * st.f_frsize
    }
}

impl Drop for Xfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it (a panicking test's open file): detach it lazily.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

#[track_caller]
fn run(cmd: &mut Command, what: &str) {
    match cmd.output() {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "running as root, but {what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("running as root, but {what} could not start: {e}"),
    }
}

/// Whether every extent of the file at `path` is shared with another file (FIEMAP's
/// `FIEMAP_EXTENT_SHARED`, as `filefrag -v` from e2fsprogs prints it), and it has at least one.
pub fn all_extents_shared(path: &Path) -> bool {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "filefrag -v failed");
    let text = String::from_utf8_lossy(&out.stdout);
    // Extent lines start with the extent's number: "   0:        0..     255: ... flags".
    let extents: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.trim_start()
                .split(':')
                .next()
                .is_some_and(|n| n.trim().parse::<u32>().is_ok())
        })
        .collect();
    !extents.is_empty() && extents.iter().all(|l| l.contains("shared"))
}
