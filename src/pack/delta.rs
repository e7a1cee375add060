//! git's delta encoding: a target object as copies from a source object and inserted bytes
//! (`gitformat-pack` "Deltified representation"), for pushes that send an edited file as a delta
//! against the version the server already has.
//!
//! No crate in the registry fits (checked 2026-12-01): `git-pack-delta` does not resolve,
//! `sley-pack` needs Rust 1.98 (this project builds with 1.95), `git-internal` brings a whole git
//! implementation. The encoder here follows the idea of git's `diff-delta.c` — the source indexed by
//! a hash of every 16-byte block, the target scanned with a rolling hash of the same width, each hit
//! grown forwards and backwards — without its tuning; git's own `index-pack` and `fsck` check the
//! result in the tests.

/// The width of the blocks the source is indexed by, in bytes (git uses 16 too).
const BLOCK: usize = 16;
/// Blocks looked at per bucket: a source of one repeated block must not make every lookup linear.
const BUCKET_LIMIT: usize = 64;
/// The largest copy one instruction can name (a size of 0 means this).
const MAX_COPY: usize = 0x10000;
/// The largest insert one instruction can carry.
const MAX_INSERT: usize = 0x7f;
/// The multiplier of the rolling hash (a large odd constant).
const MUL: u64 = 0x100_0000_01b3;

/// The delta that rebuilds `target` from `source`, or `None` when it would not be smaller than
/// `limit` bytes (the caller sends `target` whole then).
///
/// Memory: the source's index (12 bytes per 16 bytes of source at most) and the delta itself
/// (under `limit`); both inputs are read in place. Sources and targets over 4 GiB are not encoded (the copy offsets are 32-bit).
pub fn encode(source: &[u8], target: &[u8], limit: usize) -> Option<Vec<u8>> {
    if source.len() > u32::MAX as usize || target.len() > u32::MAX as usize {
        return None;
    }
    let mut out = Vec::with_capacity(limit.min(target.len() / 2 + 64));
    push_size(&mut out, source.len());
    push_size(&mut out, target.len());
    let index = Index::of(source);
    let top = MUL.wrapping_pow(BLOCK as u32 - 1);
    let mut literal = 0; // where the bytes not yet emitted start
    let mut at = 0;
    let mut hash = None;
    while at + BLOCK <= target.len() {
        let h = match hash {
            Some(h) => h,
            None => block_hash(&target[at..at + BLOCK]),
        };
        if let Some((from, len)) = index.best(h, source, target, at) {
            // Grow the match backwards over bytes not yet emitted.
            let mut back = 0;
            while back < at - literal
                && back < from
                && source[from - back - 1] == target[at - back - 1]
            {
                back += 1;
            }
            insert(&mut out, &target[literal..at - back]);
            copy(&mut out, from - back, len + back);
            at += len;
            literal = at;
            hash = None;
        } else {
            if at + BLOCK < target.len() {
                // Roll: drop target[at], take target[at + BLOCK].
                let out_byte = u64::from(target[at]).wrapping_mul(top);
                hash = Some(
                    h.wrapping_sub(out_byte)
                        .wrapping_mul(MUL)
                        .wrapping_add(u64::from(target[at + BLOCK])),
                );
            }
            at += 1;
        }
        if out.len() >= limit {
            return None;
        }
    }
    insert(&mut out, &target[literal..]);
    (out.len() < limit).then_some(out)
}

/// The hash of one block, the same function the rolling hash keeps up to date.
fn block_hash(block: &[u8]) -> u64 {
    block
        .iter()
        .fold(0u64, |h, &b| h.wrapping_mul(MUL).wrapping_add(u64::from(b)))
}

/// The source's blocks by hash: every block at a multiple of [`BLOCK`], chained per bucket (as
/// `diff-delta.c` does), 12 bytes per block at most.
struct Index {
    /// The first block of each bucket (`u32::MAX`: none).
    heads: Vec<u32>,
    /// The next block of the same bucket, per block.
    next: Vec<u32>,
    shift: u32,
}

impl Index {
    fn of(source: &[u8]) -> Self {
        let blocks = source.len() / BLOCK;
        let bits = (blocks.max(1).next_power_of_two().trailing_zeros()).max(4);
        let mut heads = vec![u32::MAX; 1 << bits];
        let mut next = vec![u32::MAX; blocks];
        let shift = 64 - bits;
        // Backwards, so each chain lists its blocks front to back.
        for n in (0..blocks).rev() {
            let bucket = (block_hash(&source[n * BLOCK..(n + 1) * BLOCK]) >> shift) as usize;
            next[n] = heads[bucket];
            heads[bucket] = n as u32;
        }
        Index { heads, next, shift }
    }

    /// The longest match at `target[at..]` among the blocks in `h`'s bucket: (source offset,
    /// length), at least one block long.
    fn best(&self, h: u64, source: &[u8], target: &[u8], at: usize) -> Option<(usize, usize)> {
        let mut best: Option<(usize, usize)> = None;
        let mut block = self.heads[(h >> self.shift) as usize];
        let mut walked = 0;
        while block != u32::MAX && walked < BUCKET_LIMIT {
            let from = block as usize * BLOCK;
            let len = source[from..]
                .iter()
                .zip(&target[at..])
                .take_while(|(a, b)| a == b)
                .count();
            if len >= BLOCK && best.is_none_or(|(_, l)| len > l) {
                best = Some((from, len));
            }
            block = self.next[block as usize];
            walked += 1;
        }
        best
    }
}

/// A size in the delta header: 7 bits a byte, least significant first, high bit = more follow.
pub(super) fn push_size(out: &mut Vec<u8>, mut size: usize) {
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        if size == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Insert instructions for `bytes`, 127 at most each.
fn insert(out: &mut Vec<u8>, bytes: &[u8]) {
    for piece in bytes.chunks(MAX_INSERT) {
        out.push(piece.len() as u8);
        out.extend_from_slice(piece);
    }
}

/// Copy instructions for `len` bytes from `offset` of the source, 64 KiB at most each: the
/// first byte's low 4 bits say which offset bytes follow, the next 3 which size bytes.
fn copy(out: &mut Vec<u8>, mut offset: usize, mut len: usize) {
    while len > 0 {
        let n = len.min(MAX_COPY);
        let at = out.len();
        out.push(0x80);
        for i in 0..4 {
            let byte = (offset >> (8 * i)) as u8;
            if byte != 0 {
                out[at] |= 1 << i;
                out.push(byte);
            }
        }
        let size = if n == MAX_COPY { 0 } else { n };
        for i in 0..3 {
            let byte = (size >> (8 * i)) as u8;
            if byte != 0 {
                out[at] |= 0x10 << i;
                out.push(byte);
            }
        }
        offset += n;
        len -= n;
    }
}

/// The object `delta` rebuilds from `source` (`gitformat-pack` "Deltified representation": the
/// source's size, the target's size, then copy and insert instructions), or `None` when the delta
/// is malformed, names another source size, or claims a target over `limit` bytes. Every offset
/// and length is checked: the delta may come from a hostile server.
pub fn apply(source: &[u8], delta: &[u8], limit: usize) -> Option<Vec<u8>> {
    let mut at = 0;
    let mut size = || {
        let (mut v, mut shift) = (0usize, 0u32);
        loop {
            let b = *delta.get(at)?;
            at += 1;
            v |= usize::from(b & 0x7f).checked_shl(shift)?;
            shift += 7;
            if b & 0x80 == 0 {
                return Some(v);
            }
            if shift > 63 {
                return None;
            }
        }
    };
    if size()? != source.len() {
        return None;
    }
    let target_len = size()?;
    if target_len > limit {
        return None;
    }
    // Reserved only once the instructions are known to make exactly what the delta claims.
    let mut walk = Walk::default();
    walk.feed(delta).ok()?;
    walk.finish().ok()?;
    let mut out = Vec::with_capacity(target_len);
    while at < delta.len() {
        let op = delta[at];
        at += 1;
        if op & 0x80 != 0 {
            let (mut offset, mut len) = (0usize, 0usize);
            for i in 0..4 {
                if op & (1 << i) != 0 {
                    offset |= usize::from(*delta.get(at)?) << (8 * i);
                    at += 1;
                }
            }
            for i in 0..3 {
                if op & (0x10 << i) != 0 {
                    len |= usize::from(*delta.get(at)?) << (8 * i);
                    at += 1;
                }
            }
            if len == 0 {
                len = MAX_COPY;
            }
            out.extend_from_slice(source.get(offset..offset.checked_add(len)?)?);
        } else {
            if op == 0 {
                return None; // reserved
            }
            out.extend_from_slice(delta.get(at..at + op as usize)?);
            at += op as usize;
        }
        if out.len() > target_len {
            return None;
        }
    }
    (out.len() == target_len).then_some(out)
}

/// A delta's instructions followed as they inflate (`gitformat-pack` "Deltified
/// representation": the base's size and the result's as varints, then copies from the base and
/// inserted bytes), so that the result size it claims is checked against what its instructions
/// make before anything that size is allocated (gix-pack reserves the claimed size to apply it).
#[derive(Debug, Default)]
pub(crate) struct Walk {
    /// The base's and the result's sizes; `sizes_read` of them are complete.
    sizes: [u64; 2],
    sizes_read: usize,
    shift: u32,
    /// The argument bytes of the current copy still to read (its opcode's low 7 bits).
    args: u8,
    copy_size: u64,
    /// Inserted bytes still to pass over.
    insert_left: u64,
    /// What the instructions read so far make.
    made: u64,
}

impl Walk {
    /// The result size the delta claims, once read.
    pub(crate) fn result(&self) -> Option<u64> {
        (self.sizes_read == 2).then_some(self.sizes[1])
    }

    /// Follow `data`, the next bytes of the delta.
    pub(crate) fn feed(&mut self, mut data: &[u8]) -> Result<(), String> {
        while let Some((&b, rest)) = data.split_first() {
            if self.sizes_read < 2 {
                if self.shift > 63 {
                    return Err("a size over 64 bits".to_owned());
                }
                self.sizes[self.sizes_read] |= u64::from(b & 0x7f) << self.shift;
                self.shift += 7;
                if b & 0x80 == 0 {
                    self.sizes_read += 1;
                    self.shift = 0;
                }
                data = rest;
            } else if self.insert_left > 0 {
                let n = self.insert_left.min(data.len() as u64);
                self.insert_left -= n;
                data = &data[n as usize..];
            } else if self.args != 0 {
                let i = self.args.trailing_zeros();
                self.args &= self.args - 1;
                if i >= 4 {
                    self.copy_size |= u64::from(b) << (8 * (i - 4));
                }
                if self.args == 0 {
                    self.made(if self.copy_size == 0 {
                        0x10000
                    } else {
                        self.copy_size
                    })?;
                }
                data = rest;
            } else if b & 0x80 != 0 {
                // A copy: its offset and size bytes follow, as its low bits say.
                (self.args, self.copy_size) = (b & 0x7f, 0);
                if self.args == 0 {
                    self.made(0x10000)?;
                }
                data = rest;
            } else if b == 0 {
                return Err("the reserved instruction 0".to_owned());
            } else {
                self.insert_left = u64::from(b);
                self.made(u64::from(b))?;
                data = rest;
            }
        }
        Ok(())
    }

    fn made(&mut self, n: u64) -> Result<(), String> {
        self.made += n;
        if self.made > self.sizes[1] {
            return Err(format!(
                "its instructions make more than the {} bytes it claims",
                self.sizes[1]
            ));
        }
        Ok(())
    }

    /// After the delta's last byte: its instructions must be whole and make what it claims.
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.sizes_read < 2 || self.args != 0 || self.insert_left > 0 {
            return Err("it ends inside an instruction".to_owned());
        }
        if self.made != self.sizes[1] {
            return Err(format!(
                "its instructions make {} bytes, but it claims {}",
                self.made, self.sizes[1]
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(delta: &[u8], split: usize) -> (Option<u64>, Result<(), String>) {
        let mut w = Walk::default();
        let fed = w
            .feed(&delta[..split.min(delta.len())])
            .and_then(|()| w.feed(&delta[split.min(delta.len())..]));
        let result = w.result();
        (result, fed.and_then(|()| w.finish()))
    }

    #[test]
    fn delta_sizes_are_read_from_the_varints() {
        // base 1, result 6 GiB (varint of 6 << 30).
        let mut d = vec![0x01];
        push_size(&mut d, 6 << 30);
        assert_eq!(walk(&d, 1).0, Some(6 << 30));
        assert_eq!(walk(&[0x80], 1).0, None);
    }

    #[test]
    fn a_delta_must_make_what_it_claims() {
        let source = b"the quick brown fox jumps over the lazy dog, again and again".repeat(50);
        let mut target = source.clone();
        target.splice(100..110, b"CHANGED!!!".iter().copied());
        target.extend_from_slice(b"and a tail");
        let delta = encode(&source, &target, usize::MAX).unwrap();
        for split in [0, 1, 2, 3, 5, delta.len() / 2, delta.len()] {
            assert_eq!(walk(&delta, split), (Some(target.len() as u64), Ok(())));
        }
        // A copy with no arguments copies 0x10000 bytes.
        let mut d = vec![0x01];
        push_size(&mut d, 0x10000);
        d.push(0x80);
        assert_eq!(walk(&d, 1).1, Ok(()));
        // Claims more than it makes, makes more than it claims, is cut, uses instruction 0.
        let mut d = vec![0x01];
        push_size(&mut d, 500 << 20);
        d.extend_from_slice(&[0x01, b'y']);
        assert!(walk(&d, 2).1.unwrap_err().contains("make 1 bytes"));
        let d = [0x01, 0x01, 0x02, b'y', b'z'];
        assert!(walk(&d, 2).1.unwrap_err().contains("more than"));
        let d = [0x01, 0x02, 0x02, b'y'];
        assert!(walk(&d, 2).1.unwrap_err().contains("inside"));
        let d = [0x01, 0x01, 0x00];
        assert!(walk(&d, 2).1.unwrap_err().contains("reserved"));
    }

    /// The decoder, asserting what the encoder makes.
    fn apply(source: &[u8], delta: &[u8]) -> Vec<u8> {
        crate::pack::delta::apply(source, delta, usize::MAX).expect("a valid delta")
    }

    fn text(lines: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..lines)
            .flat_map(|i| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                format!("line {i}: value {}\n", s >> 40).into_bytes()
            })
            .collect()
    }

    #[test]
    fn a_one_line_edit_is_a_small_delta_that_rebuilds_the_target() {
        let source = text(40_000, 1); // about 1 MB
        let mut target = source.clone();
        let at = target.len() / 2;
        target.splice(at..at, b"an inserted line\n".iter().copied());
        let delta = encode(&source, &target, target.len()).unwrap();
        assert!(delta.len() < 100, "{} bytes", delta.len());
        assert_eq!(apply(&source, &delta), target);
    }

    #[test]
    fn growth_shrinking_and_long_copies_round_trip() {
        let source = text(20_000, 2);
        let cases: Vec<Vec<u8>> = vec![
            [source.as_slice(), source.as_slice()].concat(), // every copy over 64 KiB
            source[source.len() / 3..].to_vec(),
            source[..100].to_vec(),
            [b"head\n".as_slice(), &source, b"tail\n"].concat(),
            Vec::new(),
            b"short".to_vec(),
        ];
        for target in cases {
            let delta = encode(&source, &target, usize::MAX).unwrap();
            assert_eq!(apply(&source, &delta), target, "{} bytes", target.len());
        }
        // From an empty or tiny source too.
        for source in [&b""[..], b"abc"] {
            let target = text(100, 3);
            let delta = encode(source, &target, usize::MAX).unwrap();
            assert_eq!(apply(source, &delta), target);
        }
    }

    #[test]
    fn a_replaced_file_is_no_delta_under_its_own_size() {
        let (source, target) = (noise(100_000, 4), noise(100_000, 5));
        assert_eq!(encode(&source, &target, target.len()), None);
    }

    fn noise(len: usize, mut s: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn binary_data_round_trips() {
        let source = noise(200_000, 9);
        let mut target = source.clone();
        for i in (0..target.len()).step_by(10_000) {
            target[i] ^= 0xff;
        }
        let delta = encode(&source, &target, target.len()).unwrap();
        assert!(delta.len() < 2_000, "{} bytes", delta.len());
        assert_eq!(apply(&source, &delta), target);
    }

    #[test]
    fn a_hostile_delta_is_refused_not_a_panic() {
        let source = b"0123456789abcdef".repeat(8);
        let good = encode(&source, &[&source[..], b"tail"].concat(), usize::MAX).unwrap();
        assert!(crate::pack::delta::apply(&source, &good, usize::MAX).is_some());
        // Cut anywhere: refused.
        for cut in 0..good.len() {
            assert!(
                crate::pack::delta::apply(&source, &good[..cut], usize::MAX).is_none(),
                "cut at {cut}"
            );
        }
        // Another source size, a copy past the source's end, the reserved instruction, a size
        // over the limit, a varint that never ends.
        assert!(crate::pack::delta::apply(&source[1..], &good, usize::MAX).is_none());
        assert!(
            crate::pack::delta::apply(&source, &[128, 1, 4, 0x91, 126, 4], usize::MAX).is_none()
        );
        assert!(crate::pack::delta::apply(&source, &[128, 1, 1, 0], usize::MAX).is_none());
        assert!(crate::pack::delta::apply(&source, &good, 10).is_none());
        assert!(crate::pack::delta::apply(&source, &[0xff; 12], usize::MAX).is_none());
    }
}
