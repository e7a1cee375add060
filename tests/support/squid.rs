//! A real forward proxy for the tests: Debian's squid (`squid-openssl`, unpacked into
//! `target/peers/squid` by `scripts/peers`), started in the foreground on 127.0.0.1 with a
//! config file, logs, pid file and cache folder of its own temporary folder: never the system's
//! service or config. It forwards http requests and opens CONNECT tunnels to any port; with
//! credentials it wants Basic proxy auth (its `basic_ncsa_auth` helper and an htpasswd file
//! written here); with a CA it listens over TLS (`https_port`), its certificate from that CA.

#![allow(dead_code)]

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::TestCa;

/// The user name the proxy wants (its password is [`super::PROXY_PASSWORD`]).
pub const PROXY_USER: &str = "pu";

/// A running squid; stopped when dropped.
pub struct Squid {
    child: Child,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    /// `http` or `https` (how it is reached).
    pub scheme: &'static str,
    /// Its service name (`-n`): its shared-memory segments are named after it, so two squids
    /// (tests run in parallel) never share one.
    service: String,
    dir: tempfile::TempDir,
}

/// Where `scripts/peers` unpacked squid.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/peers/squid")
}

impl Squid {
    /// A squid wanting `password` (for [`PROXY_USER`]) when given, over TLS with a certificate of
    /// `tls` when given.
    pub fn start(password: Option<&str>, tls: Option<&TestCa>) -> Self {
        let bin = root().join("usr/sbin/squid");
        assert!(
            bin.is_file(),
            "squid is not installed ({} is missing): run scripts/peers",
            bin.display()
        );
        let dir = tempfile::Builder::new()
            .prefix("gs-squid-")
            .tempdir()
            .unwrap();
        // As root squid runs as `nobody`, who must reach its own files and write its logs.
        let as_root = std::fs::metadata(dir.path()).unwrap().uid() == 0;
        if as_root {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        if let Some(password) = password {
            std::fs::write(dir.path().join("htpasswd"), htpasswd_line(password)).unwrap();
        }
        if let Some(ca) = tls {
            std::fs::write(dir.path().join("cert.pem"), &ca.leaf_pem).unwrap();
            std::fs::write(dir.path().join("key.pem"), &ca.key_pem).unwrap();
        }
        // A free port may be taken between the probe and squid's bind: try a few.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let conf = config(dir.path(), port, password.is_some(), tls.is_some(), as_root);
            std::fs::write(dir.path().join("squid.conf"), conf).unwrap();
            let service = format!("gs{}p{port}", std::process::id());
            remove_segments(&service);
            let mut child = Command::new(&bin)
                .arg("-N")
                .arg("-n")
                .arg(&service)
                .arg("-f")
                .arg(dir.path().join("squid.conf"))
                .stdin(Stdio::null())
                .stdout(std::fs::File::create(dir.path().join("stdout.log")).unwrap())
                .stderr(std::fs::File::create(dir.path().join("stderr.log")).unwrap())
                .spawn()
                .expect("start squid");
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(30) {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Squid {
                        child,
                        port,
                        scheme: if tls.is_some() { "https" } else { "http" },
                        service,
                        dir,
                    };
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            remove_segments(&service);
        }
        panic!("squid did not start:\n{}", Self::logs_in(dir.path()));
    }

    /// The proxy's URL, with `userinfo` (e.g. `pu:PASSWORD`, percent-encoded) if given.
    pub fn url(&self, userinfo: Option<&str>) -> String {
        match userinfo {
            Some(u) => format!("{}://{u}@127.0.0.1:{}", self.scheme, self.port),
            None => format!("{}://127.0.0.1:{}", self.scheme, self.port),
        }
    }

    /// Its access log: one line per request it handled (`CONNECT localhost:PORT`, `GET http://…`),
    /// with the proxy user that made it and the client's quoted `User-Agent` (`"git/2.47.3"` for
    /// git, `"git/2.47-compatible git-session/…"` for git-session).
    pub fn access_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default()
    }

    /// The access log once it holds `needle` (squid logs a tunnel when it closes, a moment after
    /// the client has gone), or as it is after 10 s.
    pub fn access_log_with(&self, needle: &str) -> String {
        self.access_log_until(|log| log.contains(needle))
    }

    /// The access log once `done` says so, or as it is after 10 s.
    pub fn access_log_until(&self, done: impl Fn(&str) -> bool) -> String {
        let started = Instant::now();
        loop {
            let log = self.access_log();
            if done(&log) || started.elapsed() > Duration::from_secs(10) {
                return log;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything it logged, for a failing test's message.
    pub fn logs(&self) -> String {
        Self::logs_in(self.dir.path())
    }

    fn logs_in(dir: &Path) -> String {
        ["stderr.log", "cache.log", "access.log"]
            .iter()
            .map(|f| {
                format!(
                    "--- {f} ---\n{}",
                    std::fs::read_to_string(dir.join(f)).unwrap_or_default()
                )
            })
            .collect()
    }
}

impl Drop for Squid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_segments(&self.service);
    }
}

/// Remove the shared-memory segments of squid `service` (a killed squid leaves them behind, and
/// the next one of that name would refuse to start).
fn remove_segments(service: &str) {
    let Ok(entries) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for entry in entries.flatten() {
        if entry
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("{service}-"))
        {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// `PROXY_USER:<apr1 hash>`, the hash made by `openssl passwd` from stdin (never argv).
fn htpasswd_line(password: &str) -> String {
    let mut child = Command::new("openssl")
        .args(["passwd", "-apr1", "-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("openssl");
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    format!("{PROXY_USER}:{}", String::from_utf8(out.stdout).unwrap())
}

fn config(dir: &Path, port: u16, auth: bool, tls: bool, as_root: bool) -> String {
    let d = dir.display();
    let r = root();
    let r = r.display();
    let listen = if tls {
        format!("https_port 127.0.0.1:{port} tls-cert={d}/cert.pem tls-key={d}/key.pem")
    } else {
        format!("http_port 127.0.0.1:{port}")
    };
    let access = if auth {
        format!(
            "auth_param basic program {r}/usr/lib/squid/basic_ncsa_auth {d}/htpasswd\n\
             auth_param basic children 2\n\
             auth_param basic realm git-session tests\n\
             acl authed proxy_auth REQUIRED\n\
             http_access allow authed\n"
        )
    } else {
        "http_access allow all\n".to_owned()
    };
    let user = if as_root {
        "cache_effective_user nobody\n"
    } else {
        ""
    };
    format!(
        "{listen}\n\
         visible_hostname git-session-tests\n\
         pid_filename {d}/squid.pid\n\
         cache_log {d}/cache.log\n\
         logformat gs %ts.%03tu %>a %Ss/%03>Hs %rm %ru %un \"%{{User-Agent}}>h\"\n\
         access_log stdio:{d}/access.log gs\n\
         coredump_dir {d}\n\
         cache deny all\n\
         cache_mem 8 MB\n\
         max_filedescriptors 1024\n\
         netdb_filename none\n\
         pinger_enable off\n\
         shutdown_lifetime 0 seconds\n\
         icon_directory {r}/usr/share/squid/icons\n\
         error_directory {r}/usr/share/squid-langpack/templates\n\
         mime_table {r}/usr/share/squid/mime.conf\n\
         unlinkd_program {r}/usr/lib/squid/unlinkd\n\
         {user}{access}http_access deny all\n"
    )
}
