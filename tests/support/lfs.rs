//! Git LFS for the integration tests: a real giftless server (`tests/peers/giftless_server.py`,
//! installed by `scripts/peers` into `target/peers/giftless/venv`), repositories made with the
//! real `git lfs` client, and, for hostile-input tests only, a small HTTP server that answers as
//! a test scripts it (a lying LFS server: wrong content, an endless body, a redirect elsewhere).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::World;
use super::peer::PeerProcess;

/// A giftless LFS server storing objects under a folder; stopped when dropped.
pub struct Giftless {
    process: PeerProcess,
    /// Where it keeps objects: `<store>/<org>/<repo>/<oid>`.
    pub store: PathBuf,
}

impl Giftless {
    /// Start giftless on a free port, objects under `store`.
    pub fn start(store: &Path) -> Self {
        let here = Path::new(env!("CARGO_MANIFEST_DIR"));
        let python = here.join("target/peers/giftless/venv/bin/python");
        assert!(
            python.exists(),
            "giftless is not installed ({} is missing): run scripts/peers",
            python.display()
        );
        std::fs::create_dir_all(store).unwrap();
        let mut cmd = Command::new(&python);
        cmd.arg(here.join("tests/peers/giftless_server.py"))
            .arg(store)
            .arg("0");
        Giftless {
            process: PeerProcess::spawn("giftless", cmd, Duration::from_secs(60)),
            store: store.to_owned(),
        }
    }

    /// The LFS URL of `org/repo` (what `.lfsconfig`'s `lfs.url` names).
    pub fn url(&self, org_repo: &str) -> String {
        self.process.url(org_repo)
    }

    /// The request log.
    pub fn stderr(&self) -> String {
        self.process.stderr()
    }
}

/// The SHA-256 of `data`, as LFS names objects.
pub fn oid(data: &[u8]) -> String {
    let out = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(data)?;
            c.wait_with_output()
        })
        .unwrap();
    String::from_utf8_lossy(&out.stdout)[..64].to_owned()
}

/// A scratch repository whose `*.bin` files are LFS files (`git lfs track`), with `.lfsconfig`
/// naming `lfs_url`; `files` are written and committed with the real git-lfs client, and the
/// objects pushed to the LFS server with `git lfs push --all`. Returns the scratch folder and the
/// commit id.
pub fn lfs_repo(
    w: &World,
    name: &str,
    lfs_url: &str,
    files: &[(&str, &[u8])],
) -> (PathBuf, String) {
    let scratch = w.scratch(name);
    w.git(&scratch, &["lfs", "install", "--local"]);
    w.git(&scratch, &["lfs", "track", "*.bin"]);
    w.git(
        &scratch,
        &["config", "-f", ".lfsconfig", "lfs.url", lfs_url],
    );
    for (path, data) in files {
        let p = scratch.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }
    let tip = w.commit_all(&scratch, "lfs files");
    w.git(&scratch, &["lfs", "push", "--all", lfs_url]);
    (scratch, tip)
}

/// One request a [`Scripted`] server received.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `GET`, `POST`.
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// The head as received (request line and headers).
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

/// What a [`Scripted`] server answers.
pub enum Reply {
    /// A status, extra headers and a body.
    Full(u16, Vec<(String, String)>, Vec<u8>),
    /// 200 with a `Content-Length` of this many bytes, then this chunk forever.
    Endless(u64, Vec<u8>),
    /// 200 with a `Content-Length` of this many bytes, these bytes, then nothing (the connection
    /// held open for a minute).
    Stall(u64, Vec<u8>),
}

type Handler = dyn Fn(&Seen, u16) -> Reply + Send + Sync;

/// A hostile HTTP/1.1 server on 127.0.0.1 for LFS tests (one thread per connection, one request
/// per connection); the handler is given each request and the server's own port.
pub struct Scripted {
    /// Its port.
    pub port: u16,
    /// Every request received.
    pub seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    /// Start serving with `handler`, one request per connection.
    pub fn start(handler: impl Fn(&Seen, u16) -> Reply + Send + Sync + 'static) -> Self {
        Scripted::serve(None, handler)
    }

    /// Start serving with `handler`, keeping connections alive between requests until one has
    /// been idle for `idle`, then closing it without a word (as Apache's `KeepAliveTimeout`).
    pub fn keeping_alive(
        idle: Duration,
        handler: impl Fn(&Seen, u16) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Scripted::serve(Some(idle), handler)
    }

    fn serve(
        idle: Option<Duration>,
        handler: impl Fn(&Seen, u16) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (handler, log) = (Arc::clone(&handler), Arc::clone(&log));
                std::thread::spawn(move || serve_one(stream, &*handler, &log, port, idle));
            }
        });
        Scripted { port, seen }
    }

    /// `http://127.0.0.1:PORT/<path>`.
    pub fn url(&self, path: &str) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            path.trim_start_matches('/')
        )
    }

    /// The requests so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve_one(
    stream: std::net::TcpStream,
    handler: &Handler,
    log: &Mutex<Vec<Seen>>,
    port: u16,
    idle: Option<Duration>,
) {
    let _ = stream.set_read_timeout(Some(idle.unwrap_or(Duration::from_secs(30))));
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    loop {
        let Some(seen) = read_request(&mut reader) else {
            return;
        };
        log.lock().unwrap().push(seen.clone());
        answer(&stream, handler(&seen, port), idle.is_some());
        if idle.is_none() {
            return;
        }
    }
}

/// One request from `reader`; `None` at the end of the connection or past its read timeout.
fn read_request(reader: &mut BufReader<std::net::TcpStream>) -> Option<Seen> {
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        let end = line == "\r\n";
        head.push_str(&line);
        if end {
            break;
        }
    }
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    let _ = reader.read_exact(&mut body);
    let mut words = head.split_whitespace();
    let seen = Seen {
        method: words.next().unwrap_or_default().to_owned(),
        target: words.next().unwrap_or_default().to_owned(),
        head: head.clone(),
        body,
    };
    Some(seen)
}

fn answer(mut out: &std::net::TcpStream, reply: Reply, keep_alive: bool) {
    let close = if keep_alive {
        ""
    } else {
        "Connection: close\r\n"
    };
    match reply {
        Reply::Full(status, headers, body) => {
            let mut text = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\n{close}",
                body.len()
            );
            for (k, v) in headers {
                text.push_str(&format!("{k}: {v}\r\n"));
            }
            text.push_str("\r\n");
            // One write: the client reads a small answer whole, so its connection goes back to
            // the pool.
            let _ = out.write_all(&[text.as_bytes(), &body].concat());
        }
        Reply::Endless(claimed, chunk) => {
            let _ = out.write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\nConnection: close\r\n\r\n"
                )
                .as_bytes(),
            );
            while out.write_all(&chunk).is_ok() {}
        }
        Reply::Stall(claimed, prefix) => {
            let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {claimed}\r\n\r\n");
            let _ = out.write_all(head.as_bytes());
            let _ = out.write_all(&prefix);
            std::thread::sleep(Duration::from_secs(60));
        }
    }
}

/// A batch answer giving `href` (with `headers`) for each object of the request `seen`.
pub fn batch_answer(seen: &Seen, href: &dyn Fn(&str) -> String, headers: &[(&str, &str)]) -> Reply {
    let request: serde_json::Value = serde_json::from_slice(&seen.body).unwrap();
    let header: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    let objects: Vec<serde_json::Value> = request["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let oid = o["oid"].as_str().unwrap();
            serde_json::json!({"oid": oid, "size": o["size"], "actions": {"download": {"href": href(oid), "header": header}}})
        })
        .collect();
    Reply::Full(
        200,
        vec![("Content-Type".into(), "application/vnd.git-lfs+json".into())],
        serde_json::to_vec(&serde_json::json!({"transfer": "basic", "objects": objects})).unwrap(),
    )
}
