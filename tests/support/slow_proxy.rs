//! A slow server for the time-model tests: one TCP proxy on 127.0.0.1 in front of a real server
//! (git's `http-backend` through [`super::GitServer`], or giftless) that misbehaves at one point of
//! the exchanges it relays: it stalls, drips the rest at 1 byte/s, sends keep-alives forever, or
//! storms interim responses (`100 Continue`, `102 Processing`) in place of the head.
//!
//! It parses just enough to find the point: the request line (which kind of request), the
//! response head (status line and headers, chunked or not), and, for git's `application/x-git-*`
//! bodies, the pkt-lines (section headers, v0 shallow and ACK/NAK lines, side-band pack data).
//! Each request gets its own upstream connection and `Connection: close`; each response body is
//! read whole from the server first (test repositories are small), then sent on re-chunked, so
//! the fault lands exactly at its point. Every point it passes is recorded ([`SlowProxy::seen`]):
//! a healthy run tells which points a command has.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does at its point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// Nothing more, the connection held open.
    Stall,
    /// The rest of the response, 1 byte a second (each after its second).
    Drip,
    /// Empty side-band packets (`0005\x01`) forever, every 100 ms (in a JSON body: spaces).
    KeepAlive,
    /// Side-band progress messages (`\x02Counting objects: n\r`) forever, every 100 ms.
    Progress,
    /// Interim responses (`100 Continue`, `102 Processing`) forever in place of the head.
    Storm,
    /// Not a fault: the rest at a steady 4 KiB/s (512 bytes every 125 ms), a slow link.
    Slow,
}

impl Fault {
    /// Its name in the matrix.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Stall => "stall",
            Fault::Drip => "drip",
            Fault::KeepAlive => "keep-alive",
            Fault::Progress => "progress",
            Fault::Storm => "storm",
            Fault::Slow => "slow",
        }
    }
}

/// Where the proxy misbehaves: on requests of `kind` (see [`kind_of`], alone or as
/// `kind@repo`, the first segment of the path; `"*"`: any), at `point`:
/// `connect` (accepted, the request never read), `head` (status line and headers sent, the body
/// not begun; a storm comes before the head instead), a pkt-line label of [`labels`] (before that
/// packet), or `mid-body` (half of a body that is no pkt-line stream).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spot {
    /// The kind of request.
    pub kind: String,
    /// The point in its exchange.
    pub point: String,
}

impl Spot {
    /// At `point` of requests of `kind`.
    pub fn new(kind: &str, point: &str) -> Self {
        Spot {
            kind: kind.to_owned(),
            point: point.to_owned(),
        }
    }
}

struct Shared {
    upstream: SocketAddr,
    fault: Mutex<Option<(Spot, Fault)>>,
    /// `kind point` of every point passed (a fault's included).
    seen: Mutex<BTreeSet<String>>,
    fired: AtomicUsize,
    stop: AtomicBool,
}

/// A running proxy; stopped (its held connections closed) when dropped.
pub struct SlowProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl SlowProxy {
    /// A healthy proxy in front of `upstream`.
    pub fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            upstream,
            fault: Mutex::new(None),
            seen: Mutex::new(BTreeSet::new()),
            fired: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let sh = shared.clone();
        std::thread::spawn(move || {
            while !sh.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let sh = sh.clone();
                        std::thread::spawn(move || {
                            let _ = relay(&sh, client);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        SlowProxy { addr, shared }
    }

    /// Misbehave from now on at `spot` (every matching exchange, retries too); `None`: healthy.
    pub fn set(&self, fault: Option<(Spot, Fault)>) {
        *self.shared.fault.lock().unwrap() = fault;
    }

    /// How many exchanges the fault hit.
    pub fn fired(&self) -> usize {
        self.shared.fired.load(Ordering::SeqCst)
    }

    /// Every `kind point` passed so far.
    pub fn seen(&self) -> BTreeSet<String> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Forget what was seen and fired.
    pub fn clear(&self) {
        self.shared.seen.lock().unwrap().clear();
        self.shared.fired.store(0, Ordering::SeqCst);
    }

    /// `http://<proxy>/<path>`.
    pub fn url(&self, path: &str, userinfo: Option<&str>) -> String {
        match userinfo {
            Some(u) => format!("http://{u}@{}/{path}", self.addr),
            None => format!("http://{}/{path}", self.addr),
        }
    }
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
    }
}

/// The kind of a request, from its request line: `upload-pack-ad`, `upload-pack`,
/// `receive-pack-ad`, `receive-pack`, `lfs-batch`, `file` (`/files/`), else `other` (an LFS
/// object).
pub fn kind_of(request_line: &str) -> &'static str {
    let target = request_line.split(' ').nth(1).unwrap_or_default();
    if target.contains("info/refs?service=git-upload-pack") {
        "upload-pack-ad"
    } else if target.contains("info/refs?service=git-receive-pack") {
        "receive-pack-ad"
    } else if target.ends_with("/git-upload-pack") {
        "upload-pack"
    } else if target.ends_with("/git-receive-pack") {
        "receive-pack"
    } else if target.ends_with("/objects/batch") {
        "lfs-batch"
    } else if target.starts_with("/files/") {
        "file"
    } else {
        "lfs-object"
    }
}

/// One exchange: a fault at `connect` holds the connection; else the request goes upstream and
/// the response comes back, misbehaving at the fault's point.
fn relay(sh: &Shared, mut client: TcpStream) -> std::io::Result<()> {
    let fault = sh.fault.lock().unwrap().clone();
    if let Some((spot, _)) = fault.as_ref().filter(|(s, _)| s.point == "connect") {
        sh.seen
            .lock()
            .unwrap()
            .insert(format!("{} connect", spot.kind));
        sh.fired.fetch_add(1, Ordering::SeqCst);
        return hold(sh);
    }
    let (head, rest) = read_head(&mut client)?;
    let line = head.lines().next().unwrap_or_default().to_owned();
    let target = line.split(' ').nth(1).unwrap_or_default();
    let repo = target
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or_default();
    let kind = format!("{}@{repo}", kind_of(&line));
    let fault = fault.filter(|(s, _)| {
        s.kind == "*" || kind.starts_with(&format!("{}@", s.kind)) || s.kind == kind
    });
    let mut upstream = TcpStream::connect(sh.upstream)?;
    upstream.write_all(close_after(&head).as_bytes())?;
    upstream.write_all(&rest)?;
    let (mut from, mut to) = (client.try_clone()?, upstream.try_clone()?);
    std::thread::spawn(move || std::io::copy(&mut from, &mut to));
    let (resp_head, mut body_start) = read_head(&mut upstream)?;
    let pkt = resp_head
        .to_ascii_lowercase()
        .contains("content-type: application/x-git-");
    let chunked = resp_head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let mut raw = Vec::new();
    upstream.read_to_end(&mut raw)?;
    body_start.extend_from_slice(&raw);
    let body = if chunked {
        dechunk(&body_start)
    } else {
        body_start
    };
    let see = |point: &str| {
        sh.seen.lock().unwrap().insert(format!("{kind} {point}"));
    };
    see("head");
    let at = |point: &str| {
        fault
            .as_ref()
            .filter(|(s, _)| s.point == point)
            .map(|f| f.1)
    };
    if at("head") == Some(Fault::Storm) {
        sh.fired.fetch_add(1, Ordering::SeqCst);
        return storm(sh, &mut client);
    }
    client.write_all(rechunked_head(&resp_head).as_bytes())?;
    // Where the fault lands in the body, and the body as sent (a packet may be split there).
    let (body, marks) = if pkt {
        labels(&body)
    } else if resp_head.starts_with("HTTP/1.1 2") {
        (body.clone(), vec![(body.len() / 2, "mid-body".to_owned())])
    } else {
        (body, Vec::new())
    };
    let mut cut = None;
    for (offset, label) in std::iter::once((0, "head".to_owned())).chain(marks) {
        see(&label);
        if cut.is_none() {
            cut = at(&label).map(|f| (offset, f));
        }
    }
    let Some((offset, fault)) = cut else {
        chunk(&mut client, &body)?;
        return chunk(&mut client, b"");
    };
    sh.fired.fetch_add(1, Ordering::SeqCst);
    // (An empty chunk would end the body.)
    if offset > 0 {
        chunk(&mut client, &body[..offset])?;
    }
    misbehave(sh, &mut client, fault, &body[offset..], pkt)
}

/// Until the proxy stops: the connection stays open, nothing is sent.
fn hold(sh: &Shared) -> std::io::Result<()> {
    while !sh.stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn storm(sh: &Shared, client: &mut TcpStream) -> std::io::Result<()> {
    while !sh.stop.load(Ordering::SeqCst) {
        client.write_all(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n")?;
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// `f` every `ms` milliseconds while it returns true, until the client goes or the proxy stops.
fn every(
    sh: &Shared,
    client: &mut TcpStream,
    ms: u64,
    mut f: impl FnMut(&mut TcpStream) -> std::io::Result<bool>,
) -> std::io::Result<()> {
    while !sh.stop.load(Ordering::SeqCst) && f(client)? {
        std::thread::sleep(Duration::from_millis(ms));
    }
    Ok(())
}

/// The fault, until the client goes or the proxy stops.
fn misbehave(
    sh: &Shared,
    client: &mut TcpStream,
    fault: Fault,
    rest: &[u8],
    pkt: bool,
) -> std::io::Result<()> {
    match fault {
        Fault::Stall | Fault::Storm => hold(sh),
        Fault::Drip => {
            // Each byte after a second's pause, the first too: the shortest answer (a 4-byte
            // flush) takes 4 s, a whole second past a 3 s wait (sent at once, its last byte
            // came right at the deadline: a race, not a bound).
            for b in rest {
                std::thread::sleep(Duration::from_millis(1000));
                if sh.stop.load(Ordering::SeqCst) {
                    return Ok(());
                }
                chunk(client, &[*b])?;
            }
            chunk(client, b"")?;
            hold(sh)
        }
        Fault::Slow => {
            let mut pieces = rest.chunks(512);
            every(sh, client, 125, |c| match pieces.next() {
                Some(piece) => chunk(c, piece).map(|()| true),
                None => chunk(c, b"").map(|()| false),
            })
        }
        Fault::KeepAlive => {
            let alive: &[u8] = if pkt { b"0005\x01" } else { b" " };
            every(sh, client, 100, |c| chunk(c, alive).map(|()| true))
        }
        Fault::Progress => {
            let mut n = 0u64;
            every(sh, client, 100, |c| {
                n += 1;
                let msg = format!("\x02Counting objects: {n}\r");
                let line = format!("{:04x}{msg}", msg.len() + 4);
                chunk(c, line.as_bytes()).map(|()| true)
            })
        }
    }
}

/// The response's pkt-lines labelled: `(offset, label)` for each point a fault may land on. The
/// body comes back with the first pack data packet split in two, `mid-pack` between the halves.
/// Labels: `capabilities` (a v2 advertisement after `version 2`), `refs` (the first ref line of a
/// v0 advertisement or an `ls-refs` answer), `acknowledgments`, `shallow-info`, `packfile` (v2 section headers), `shallow`
/// and `ack` (v0's first shallow line, first ACK/NAK line), `pack-start` (the packet after the
/// `packfile` header or v0's last ACK/NAK), `mid-pack`.
pub fn labels(body: &[u8]) -> (Vec<u8>, Vec<(usize, String)>) {
    let mut out = Vec::with_capacity(body.len() + 8);
    let mut marks = Vec::new();
    let (mut pos, mut v2, mut before_pack, mut in_pack, mut split) =
        (0, false, false, false, false);
    // A v2 capability advertisement (`version 2` came first).
    let mut ad = false;
    while pos + 4 <= body.len() {
        let len = std::str::from_utf8(&body[pos..pos + 4])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok())
            .unwrap_or(0);
        let end = if len < 4 {
            pos + 4
        } else {
            (pos + len).min(body.len())
        };
        let data = &body[(pos + 4).min(end)..end];
        let text = data.strip_suffix(b"\n").unwrap_or(data);
        let here = out.len();
        let mut mark = |label: &str| {
            if !marks.iter().any(|(_, l)| l == label) {
                marks.push((here, label.to_owned()));
            }
        };
        if before_pack && len >= 4 {
            mark("pack-start");
            (before_pack, in_pack) = (false, true);
        }
        match text {
            b"version 2" => (v2, ad) = (true, true),
            b"acknowledgments" | b"shallow-info" => {
                v2 = true;
                mark(std::str::from_utf8(text).unwrap());
            }
            b"packfile" => {
                mark("packfile");
                (v2, before_pack) = (true, true);
            }
            _ if in_pack || before_pack || len < 4 => {}
            _ if ad => mark("capabilities"),
            _ if text.len() > 41 && text[40] == b' ' => mark("refs"),
            _ if text.starts_with(b"shallow ") && !v2 => mark("shallow"),
            _ if (text.starts_with(b"ACK") || text == b"NAK") && !v2 => {
                mark("ack");
                before_pack = text == b"NAK" || text.len() == 44;
            }
            _ => {}
        }
        if in_pack && !split && data.first() == Some(&1) && data.len() > 2 {
            // The first pack data packet, in two: the fault lands between them.
            let half = 1 + (data.len() - 1) / 2;
            out.extend_from_slice(format!("{:04x}", half + 4).as_bytes());
            out.extend_from_slice(&data[..half]);
            marks.push((out.len(), "mid-pack".to_owned()));
            out.extend_from_slice(format!("{:04x}\x01", data.len() - half + 5).as_bytes());
            out.extend_from_slice(&data[half..]);
            split = true;
        } else {
            out.extend_from_slice(&body[pos..end]);
        }
        pos = end;
    }
    out.extend_from_slice(&body[pos.min(body.len())..]);
    (out, marks)
}

/// The request head with `Connection: close` (one exchange per connection).
fn close_after(head: &str) -> String {
    let mut out = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        if !line.to_ascii_lowercase().starts_with("connection:") {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    out
}

/// The response head re-framed: chunked, `Connection: close`.
fn rechunked_head(head: &str) -> String {
    let mut out = String::new();
    for line in head.split("\r\n").filter(|l| !l.is_empty()) {
        let lower = line.to_ascii_lowercase();
        if !["connection:", "content-length:", "transfer-encoding:"]
            .iter()
            .any(|h| lower.starts_with(h))
        {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    out
}

/// One chunk (empty: the last).
fn chunk(to: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    if data.is_empty() {
        return to.write_all(b"0\r\n\r\n");
    }
    let mut frame = format!("{:x}\r\n", data.len()).into_bytes();
    frame.extend_from_slice(data);
    frame.extend_from_slice(b"\r\n");
    to.write_all(&frame)
}

/// A chunked body's data.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&raw[..eol]).unwrap_or("0");
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if size == 0 || raw.len() < eol + 2 + size {
            break;
        }
        out.extend_from_slice(&raw[eol + 2..eol + 2 + size]);
        raw = &raw[(eol + 4 + size).min(raw.len())..];
    }
    out
}

/// An HTTP head (up to the blank line) and the bytes read after it.
fn read_head(from: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut piece = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
            return Ok((head, buf[end + 4..].to_vec()));
        }
        let n = from.read(&mut piece)?;
        if n == 0 || buf.len() > 1 << 20 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&piece[..n]);
    }
}
