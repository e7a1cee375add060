//! Serve the bare repositories under a folder over smart HTTP on 127.0.0.1, through the same
//! `git http-backend` bridge the tests use. For the demo and the benchmarks.
//!
//! Usage: `cargo run --release --example serve -- ROOT [--port N] [--token TOKEN] [--tls CA_PEM_OUT]`
//! Prints `ready <base-url>` on stdout once listening, then serves until killed.

#[path = "../tests/support/server.rs"]
mod server;

fn main() {
    let mut args = std::env::args().skip(1);
    let root = std::path::PathBuf::from(
        args.next()
            .expect("usage: serve ROOT [--port N] [--token T] [--tls CA_PEM_OUT]"),
    );
    let (mut port, mut token, mut tls_out) = (0u16, None, None);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--port" => port = args.next().and_then(|p| p.parse().ok()).expect("--port N"),
            "--token" => token = args.next(),
            "--tls" => tls_out = args.next(),
            other => panic!("unknown argument {other}"),
        }
    }
    let ca = tls_out.as_ref().map(|out| {
        let ca = server::TestCa::new();
        std::fs::write(out, &ca.ca_pem).expect("writing the CA certificate");
        ca
    });
    let srv = server::GitServer::start_with(&root, token.as_deref(), ca.as_ref(), port);
    println!("ready {}", srv.url("", None).trim_end_matches('/'));
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    // Serve until killed.
    let _srv = srv;
    loop {
        std::thread::park();
    }
}
