//! The answer to a v2 `fetch` (`gitprotocol-v2` "fetch", output): the sections before the pack
//! (`acknowledgments`, `shallow-info`, `wanted-refs`), then the `packfile` section, handed to
//! [`super::packfile`]. A v0/v1 answer is read by [`super::v0`] instead.

use std::io::Read;
use std::sync::atomic::AtomicBool;

use gix_packetline::PacketLineRef;
use gix_packetline::blocking_io::StreamingPeekableIter;

use super::lines::{pkt_err, read_section, upload_pack_error};
use super::packfile::{CutDetector, receive_packfile};
use super::want::{Fetched, Want};
use crate::error::{Error, Result};
use crate::types::{FullSha, RemoteUrl};
use crate::wire::http::body_error;

/// Parse a `fetch` response (`gitprotocol-v2` "fetch" "output"): the sections before the pack
/// (`acknowledgments`, `shallow-info`, `wanted-refs`, each at most
/// [`MAX_SECTION_BYTES`](super::MAX_SECTION_BYTES)), then the `packfile` section, whose
/// side-band channel 1 streams into [`crate::pack::receive()`] in `want.pack_dir`. `url` is for
/// messages only.
///
/// # Errors
/// As [`fetch_pack`](super::fetch_pack), but for the HTTP ones and the missing `fetch=shallow`.
pub(crate) fn read_fetch(
    url: &RemoteUrl,
    body: impl Read,
    want: Want<'_>,
    interrupt: &AtomicBool,
) -> Result<Fetched> {
    let (body, cut) = CutDetector::wrap(body);
    let mut lines = StreamingPeekableIter::new(
        body,
        &[PacketLineRef::Flush, PacketLineRef::Delimiter],
        false,
    );
    let shallow = read_sections_before_pack(url, &mut lines, want.commit.format())?;
    lines.reset_with(&[PacketLineRef::Flush]);
    let outcome = receive_packfile(url, &mut lines, want, interrupt, &cut, true)?;
    super::packfile::checked(url, &want, shallow, outcome)
}

/// Read the sections of a fetch response up to the `packfile` header, returning the
/// `shallow-info` ids.
fn read_sections_before_pack<R: Read>(
    url: &RemoteUrl,
    lines: &mut StreamingPeekableIter<R>,
    format: crate::types::Format,
) -> Result<Vec<gix::ObjectId>> {
    let mut shallow = Vec::new();
    loop {
        // Each section whole within its own wait, keep-alives or not.
        crate::wire::watch::section("section header of the fetch answer");
        let name = match lines.read_line() {
            Some(line) => {
                let line = line
                    .map_err(|e| body_error(url, e))?
                    .map_err(|e| pkt_err(url, e))?;
                if let Some(err) = line.check_error() {
                    return Err(upload_pack_error(url, &crate::text::line(err.0)));
                }
                line.as_slice()
                    .map(|d| d.strip_suffix(b"\n").unwrap_or(d).to_vec())
            }
            None => None,
        };
        let Some(name) = name else {
            return Err(Error::Network(format!(
                "{url} ended the fetch response without a pack"
            )));
        };
        crate::wire::watch::section(match name.as_slice() {
            b"acknowledgments" => "acknowledgments section",
            b"shallow-info" => "shallow-info section",
            b"wanted-refs" => "wanted-refs section",
            b"packfile-uris" => "packfile-uris section",
            _ => "section",
        });
        match name.as_slice() {
            b"packfile" => return Ok(shallow),
            b"shallow-info" => {
                for l in read_section(url, lines)? {
                    if let Some(hex) = l.strip_prefix(b"shallow ") {
                        let id = FullSha::from_wire_in(format, hex)
                            .ok_or_else(|| pkt_err(url, "malformed shallow line"))?;
                        shallow.push(id.id());
                    }
                }
                lines.reset();
            }
            b"acknowledgments" | b"wanted-refs" => {
                read_section(url, lines)?;
                lines.reset();
            }
            other => {
                return Err(pkt_err(
                    url,
                    format!("unknown section '{}'", crate::text::line(other)),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testing::{
        BAD_PREFIXES, COMMIT2, Endless, NOT_OUR_REF, PACK_OBJECTS, assert_err, cuts, pkt, url,
        with_first_prefix,
    };
    use crate::wire::upload_pack::lines::MAX_SECTION_BYTES;

    const FETCH: &[u8] = include_bytes!("../../../tests/fixtures/wire/fetch-depth-1.response");
    /// The id of the pack in [`FETCH`] (its trailer).
    const PACK_ID: &str = "422f3fabcfc8ed43aa55c0a61ac13625cfa203c5";

    /// [`read_fetch`] of `body` for commit2 at depth 1 into a new directory, kept with the result.
    fn fetch_with(
        body: impl Read,
        limits: crate::pack::PackLimits,
    ) -> (Result<Fetched>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let want = Want::depth_one(COMMIT2.parse().unwrap(), dir.path(), limits);
        (read_fetch(&url(), body, want, &AtomicBool::new(false)), dir)
    }

    fn fetch(body: impl Read) -> Result<Fetched> {
        fetch_with(body, crate::pack::PackLimits::default()).0
    }

    /// [`FETCH`] up to the end of the `packfile` header, then `rest`.
    fn packfile_then(rest: &[u8]) -> Vec<u8> {
        let header = FETCH.windows(9).position(|w| w == b"packfile\n").unwrap() + 9;
        [&FETCH[..header], rest].concat()
    }

    #[test]
    fn fetch_gives_the_shallow_commit_and_the_pack() {
        let (fetched, dir) = fetch_with(FETCH, crate::pack::PackLimits::default());
        let fetched = fetched.unwrap();
        assert_eq!(
            fetched.shallow,
            vec![COMMIT2.parse::<FullSha>().unwrap().id()]
        );
        assert_eq!(fetched.objects, 3);
        assert!(fetched.big.is_empty());
        let pack = dir.path().join(format!("pack-{PACK_ID}.pack"));
        assert_eq!(fetched.pack_path.as_deref(), Some(pack.as_path()));
        let index =
            gix_pack::index::File::at(pack.with_extension("idx"), gix::hash::Kind::Sha1).unwrap();
        let ids: Vec<String> = index.iter().map(|e| e.oid.to_string()).collect();
        assert_eq!(ids, PACK_OBJECTS);
    }

    /// A SHA-256 fetch answer (the fuzz seed `fuzz/seeds.py` makes with git): its shallow id
    /// and the pack read with 64-digit ids and a 32-byte trailer; cut anywhere, a network failure.
    #[test]
    fn a_sha256_fetch_gives_its_shallow_commit_and_pack() {
        let seed = include_bytes!("../../../fuzz/corpus/upload_pack/fetch-sha256");
        let body = &seed[1..];
        // The commit of the seed's repository (`SHA256_COMMIT` in src/fuzzing.rs).
        let commit: FullSha = "516c254a478a140b6edc3edf04ca4aeab6e38545c3c7a00d432a3a700c6089dc"
            .parse()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let want = Want::depth_one(commit, dir.path(), Default::default());
        let fetched = read_fetch(&url(), body, want, &AtomicBool::new(false)).unwrap();
        assert_eq!(fetched.shallow, vec![commit.id()]);
        assert_eq!(fetched.objects, 3);
        let pack = fetched.pack_path.unwrap();
        let index =
            gix_pack::index::File::at(pack.with_extension("idx"), gix::hash::Kind::Sha256).unwrap();
        assert!(index.lookup(commit.id()).is_some());
        index
            .verify_checksum(&mut gix::progress::Discard, &AtomicBool::new(false))
            .unwrap();
        // Asked for as a SHA-1 commit, the same answer is refused: its shallow id is SHA-256.
        let sha1: FullSha = COMMIT2.parse().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let want = Want::depth_one(sha1, dir.path(), Default::default());
        assert_err!(
            read_fetch(&url(), body, want, &AtomicBool::new(false)),
            Error::Protocol(_)
        );
    }

    #[test]
    fn fetch_cut_off_anywhere_is_a_network_failure() {
        for cut in cuts(FETCH, 0) {
            assert_err!(fetch(cut), Error::Network(_));
        }
        assert_err!(fetch(&b"0000"[..]), Error::Network(m) if m.contains("without a pack"));
    }

    #[test]
    fn fetch_with_a_corrupt_or_too_large_pack_is_an_integrity_failure() {
        // The pack's last byte, the end of its checksum, sits in the last side-band packet.
        let mut corrupt = FETCH.to_vec();
        let last = corrupt.len() - 5;
        corrupt[last] ^= 0xff;
        assert_err!(fetch(corrupt.as_slice()), Error::Integrity(_));
        let small = crate::pack::PackLimits {
            max_object_bytes: 100,
            big_object_bytes: 100,
            max_tree_entries: crate::pack::DEFAULT_MAX_TREE_ENTRIES,
        };
        assert_err!(fetch_with(FETCH, small).0, Error::Integrity(m) if m.contains("refused"));
    }

    #[test]
    fn fetch_with_a_bad_line_or_section_is_refused() {
        for prefix in BAD_PREFIXES {
            assert_err!(
                fetch(with_first_prefix(FETCH, prefix).as_slice()),
                Error::Protocol(_)
            );
        }
        let unknown = [&pkt(b"surprise\n")[..], b"0000"].concat();
        let bad_shallow = [&pkt(b"shallow-info\n")[..], &pkt(b"shallow 1234"), b"0001"].concat();
        for body in [unknown, bad_shallow, pkt(b"ERR fetch failed")] {
            assert_err!(fetch(body.as_slice()), Error::Protocol(_));
        }
    }

    #[test]
    fn fetch_of_a_commit_the_server_lacks_is_not_found() {
        assert_err!(fetch(pkt(NOT_OUR_REF).as_slice()), Error::NotFound(_));
        let mut on_channel_3 = b"\x03".to_vec();
        on_channel_3.extend_from_slice(&NOT_OUR_REF[4..]);
        let body = packfile_then(&pkt(&on_channel_3));
        assert_err!(fetch(body.as_slice()), Error::NotFound(_));
        let body = packfile_then(&pkt(b"\x03fatal: out of memory\n"));
        assert_err!(fetch(body.as_slice()), Error::Protocol(m) if m.contains("out of memory"));
    }

    #[test]
    fn fetch_section_without_end_is_refused_at_the_bound() {
        let line = pkt(format!("shallow {COMMIT2}").as_bytes());
        let body = Endless::new(pkt(b"shallow-info\n"), line, MAX_SECTION_BYTES);
        assert_err!(fetch(body), Error::Protocol(_));
    }
}
