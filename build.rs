//! Links the release binary stripped (`--strip-all`; with `GIT_SESSION_SYMBOLS=1`, with its
//! symbols, for `scripts/symbol-order`) and hands `link/symbol-order.txt` to the linker, so the code
//! a command runs sits together and fewer of the binary's pages become resident (the kernel maps
//! code 64 KiB around each page touched). The order only where the linker is known to be lld, which
//! takes `--symbol-ordering-file`: rustc 1.90 and later on x86_64 Linux by default, with no linker
//! chosen in the flags. Anywhere else the binary is the same, only less compact.

// A build script speaks to cargo on its stdout, not to a user's terminal.
#![allow(clippy::disallowed_macros)]

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=link/symbol-order.txt");
    println!("cargo:rerun-if-env-changed=GIT_SESSION_SYMBOLS");
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    if env("PROFILE") != "release" {
        return;
    }
    let arg = |a: &str| println!("cargo:rustc-link-arg-bin=git-session={a}");
    if env("GIT_SESSION_SYMBOLS") != "1" {
        arg("-Wl,--strip-all");
    }
    let default_lld = env("TARGET") == "x86_64-unknown-linux-gnu"
        && !env("CARGO_ENCODED_RUSTFLAGS").contains("linker")
        && std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_none()
        && rustc_minor().is_some_and(|minor| minor >= 90);
    let order = std::path::Path::new(&env("CARGO_MANIFEST_DIR")).join("link/symbol-order.txt");
    if default_lld && order.is_file() {
        arg(&format!("-Wl,--symbol-ordering-file={}", order.display()));
        arg("-Wl,--no-warn-symbol-ordering");
    }
}

/// The minor version of the rustc building this crate (`rustc 1.95.0 (…)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    let mut parts = version.split('.');
    (parts.next()? == "1").then_some(())?;
    parts.next()?.parse().ok()
}
