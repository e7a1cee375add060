//! Bytes of git's wire formats, for the answers of a hostile server: pkt-lines and side-band
//! (`gitprotocol-common`, `gitprotocol-pack`), protocol v2 fetch responses (`gitprotocol-v2`),
//! and packs (`gitformat-pack`), crafted or made by `git pack-objects`.

use std::io::Write as _;
use std::path::Path;

use super::World;

/// One pkt-line of text.
pub fn pkt(data: &str) -> String {
    format!("{:04x}{data}", data.len() + 4)
}

/// One pkt-line of bytes.
pub fn pkt_bytes(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", data.len() + 4).into_bytes();
    out.extend_from_slice(data);
    out
}

/// One side-band pkt-line on `channel` (1 data, 2 progress, 3 error).
pub fn band(channel: u8, inner: &[u8]) -> Vec<u8> {
    let mut out = format!("{:04x}", inner.len() + 5).into_bytes();
    out.push(channel);
    out.extend_from_slice(inner);
    out
}

/// A protocol v2 `fetch` response: the `packfile` section carrying `pack` on side-band 1 (in
/// packets of at most 65515 bytes), `extra` packets after it, then a flush.
pub fn fetch_response(pack: &[u8], extra: &[Vec<u8>]) -> Vec<u8> {
    fetch_response_in(pack, 65515, extra)
}

/// [`fetch_response`] with the pack in side-band packets of at most `chunk` bytes, as
/// `upload-pack` relays what `pack-objects` writes (a few KiB at a time).
pub fn fetch_response_in(pack: &[u8], chunk: usize, extra: &[Vec<u8>]) -> Vec<u8> {
    let mut out = pkt("packfile\n").into_bytes();
    for chunk in pack.chunks(chunk) {
        out.extend_from_slice(&band(1, chunk));
    }
    for e in extra {
        out.extend_from_slice(e);
    }
    out.extend_from_slice(b"0000");
    out
}

/// A pack holding exactly the objects `ids` of the bare repository `bare` (`git pack-objects`,
/// no deltas against objects outside the list).
pub fn pack_of(w: &World, bare: &Path, ids: &[&str]) -> Vec<u8> {
    pack_of_with(w, bare, ids, &[])
}

/// [`pack_of`] with more `git pack-objects` options (`--delta-base-offset`: deltas as
/// `upload-pack` sends them to a client that asks for `ofs-delta`).
pub fn pack_of_with(w: &World, bare: &Path, ids: &[&str], options: &[&str]) -> Vec<u8> {
    let input = ids.join("\n") + "\n";
    let out = std::process::Command::new("git")
        .args(["pack-objects", "--stdout", "-q"])
        .args(options)
        .current_dir(bare)
        .env_clear()
        .envs(w.env())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "git pack-objects failed");
    out.stdout
}

/// A pack entry's header: type (1 commit, 2 tree, 3 blob, 4 tag, 6 ofs-delta, 7 ref-delta) and
/// the size of its data after inflating.
pub fn entry_header(kind: u8, size: u64) -> Vec<u8> {
    let mut out = vec![(kind << 4) | (size & 0x0f) as u8];
    let mut rest = size >> 4;
    while rest > 0 {
        *out.last_mut().unwrap() |= 0x80;
        out.push((rest & 0x7f) as u8);
        rest >>= 7;
    }
    out
}

/// The offset of an ofs-delta's base, `distance` bytes back, as `gitformat-pack` writes it.
pub fn ofs_distance(mut distance: u64) -> Vec<u8> {
    let mut out = vec![(distance & 0x7f) as u8];
    distance >>= 7;
    while distance > 0 {
        distance -= 1;
        out.insert(0, 0x80 | (distance & 0x7f) as u8);
        distance >>= 7;
    }
    out
}

/// A delta's size header (a little-endian base-128 varint).
pub fn delta_size(mut size: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        if size == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// `data` deflated with zlib.
pub fn zlib(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

/// A version 2 pack of `entries` (each a header and its deflated data), with its trailer in this
/// test's object format.
pub fn raw_pack(entries: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"PACK".to_vec();
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
    for e in entries {
        out.extend_from_slice(e);
    }
    let mut h = gix::hash::hasher(super::gix_format());
    h.update(&out);
    out.extend_from_slice(h.try_finalize().unwrap().as_slice());
    out
}
