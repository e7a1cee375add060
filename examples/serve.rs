//! Serve the bare repositories under a folder over smart HTTP on 127.0.0.1, through the same
//! `git http-backend` bridge the tests use. For the demo and the benchmarks.
//!
//! Usage: `cargo run --release --example serve -- ROOT [--port N] [--token TOKEN] [--tls CA_PEM_OUT]
//! [--sent-bytes FILE] [--requests FILE] [--v0]`
//! Prints `ready <base-url>` on stdout once listening, then serves until killed. With `--sent-bytes`,
//! FILE holds the bytes of response bodies `git http-backend` has sent so far (a decimal number,
//! replaced atomically within 10 ms of a change): the benchmarks read it before and after a run.
//! `--requests FILE` likewise holds the number of requests answered so far.
//! With `--v0`, the `Git-Protocol` header is dropped, so `git http-backend` speaks protocol v0/v1
//! only (as JGit 4.11, Dulwich and Azure DevOps do): the server's `v0_only` knob.

// A test harness, not the product: it reads and prints as tests do.
#![allow(clippy::disallowed_methods, clippy::disallowed_macros)]

#[path = "../tests/support/server.rs"]
#[allow(clippy::disallowed_methods, clippy::disallowed_macros)]
mod server;

const USAGE: &str =
    "usage: serve ROOT [--port N] [--token TOKEN] [--tls CA_PEM_OUT] [--sent-bytes FILE]
       [--requests FILE] [--v0]

Serves the bare repositories under ROOT over smart HTTP on 127.0.0.1 (git http-backend) and prints
`ready <base-url>` once listening, then serves until killed. --sent-bytes FILE keeps in FILE the
bytes of response bodies sent so far, --requests FILE the requests answered; --v0 drops the Git-Protocol header, so the server speaks
protocol v0/v1 only (as JGit 4.11, Dulwich and Azure DevOps do).";

fn main() {
    if std::env::args().skip(1).any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return;
    }
    let mut args = std::env::args().skip(1);
    let root = std::path::PathBuf::from(args.next().expect(USAGE));
    let (mut port, mut token, mut tls_out, mut sent_out, mut v0) = (0u16, None, None, None, false);
    let mut requests_out: Option<std::path::PathBuf> = None;
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            "--token" => token = args.next(),
            "--tls" => tls_out = args.next(),
            "--sent-bytes" => sent_out = args.next().map(std::path::PathBuf::from),
            "--requests" => requests_out = args.next().map(std::path::PathBuf::from),
            "--v0" => v0 = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let ca = tls_out.as_ref().map(|out| {
        let ca = server::TestCa::new();
        std::fs::write(out, &ca.ca_pem).expect("writing the CA certificate");
        ca
    });
    let srv = server::GitServer::start_with(&root, token.as_deref(), ca.as_ref(), port);
    srv.knobs
        .v0_only
        .store(v0, std::sync::atomic::Ordering::SeqCst);
    println!("ready {}", srv.url("", None).trim_end_matches('/'));
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    // Serve until killed, keeping the counters' files current.
    if sent_out.is_none() && requests_out.is_none() {
        loop {
            std::thread::park();
        }
    }
    let (mut sent_written, mut requests_written) = (None, None);
    loop {
        if let Some(out) = &sent_out {
            let now = srv
                .knobs
                .sent_bytes
                .load(std::sync::atomic::Ordering::SeqCst);
            keep(out, now, &mut sent_written);
        }
        if let Some(out) = &requests_out {
            keep(out, srv.log().len() as u64, &mut requests_written);
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Replace `out` atomically with `now` when it changed since `written`.
fn keep(out: &std::path::Path, now: u64, written: &mut Option<u64>) {
    if *written != Some(now) {
        let tmp = out.with_extension("tmp");
        std::fs::write(&tmp, format!("{now}\n")).expect("writing a counter file");
        std::fs::rename(&tmp, out).expect("renaming a counter file");
        *written = Some(now);
    }
}
