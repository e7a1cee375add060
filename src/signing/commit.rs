//! A signed commit object taken apart as git takes it apart to verify it: the signature from its
//! header, the payload the signature was made over.

/// The signature of the commit object `object` from the header `header` (`gpgsig`, or
/// `gpgsig-sha256` in a SHA-256 repository: [`super::header_name`]), and the payload it was made
/// over, read as git's `parse_buffer_signed_by_header` (commit.c) reads them: the header's first
/// line and its continuation lines (each after its leading space) are the signature; the payload
/// is the object without them, and without any other `gpgsig…` header and its continuation lines
/// (a signature for the other object format); from the blank line on, everything is payload.
/// `None` for the signature: the commit is not signed (for this format).
pub fn split_commit(object: &[u8], header: &str) -> (Vec<u8>, Option<Vec<u8>>) {
    let mut payload = Vec::with_capacity(object.len());
    let mut signature = Vec::new();
    let (mut in_signature, mut saw_signature, mut other_signature) = (false, false, false);
    let mut rest = object;
    while !rest.is_empty() {
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .map_or(rest.len(), |i| i + 1);
        let line = &rest[..end];
        let sig = if in_signature && line.first() == Some(&b' ') {
            Some(&line[1..])
        } else if line.starts_with(header.as_bytes()) && line.get(header.len()) == Some(&b' ') {
            other_signature = false;
            Some(&line[header.len() + 1..])
        } else {
            if line.starts_with(b"gpgsig") {
                other_signature = true;
            } else if other_signature && line.first() != Some(&b' ') {
                other_signature = false;
            }
            None
        };
        match sig {
            Some(sig) => {
                signature.extend_from_slice(sig);
                saw_signature = true;
                in_signature = true;
                rest = &rest[end..];
            }
            None => {
                // The blank line ends the headers: the message is payload whole.
                let end = if line.first() == Some(&b'\n') {
                    rest.len()
                } else {
                    end
                };
                if !other_signature {
                    payload.extend_from_slice(&rest[..end]);
                }
                in_signature = false;
                rest = &rest[end..];
            }
        }
    }
    (payload, saw_signature.then_some(signature))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TREE: &str = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n";
    const PEOPLE: &str = "author A <a@x> 1 +0000\ncommitter A <a@x> 1 +0000\n";

    #[test]
    fn the_signature_header_is_taken_out_and_its_lines_joined() {
        let object = format!(
            "{TREE}{PEOPLE}gpgsig -----BEGIN SSH SIGNATURE-----\n abc\n \n -----END SSH \
             SIGNATURE-----\n\nmessage\n gpgsig in the message\n"
        );
        let (payload, signature) = split_commit(object.as_bytes(), "gpgsig");
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            format!("{TREE}{PEOPLE}\nmessage\n gpgsig in the message\n")
        );
        assert_eq!(
            signature.as_deref(),
            Some(&b"-----BEGIN SSH SIGNATURE-----\nabc\n\n-----END SSH SIGNATURE-----\n"[..])
        );
    }

    #[test]
    fn an_unsigned_commit_has_no_signature_and_its_whole_self_as_payload() {
        let object = format!("{TREE}{PEOPLE}\nmessage\ngpgsig x\n");
        let (payload, signature) = split_commit(object.as_bytes(), "gpgsig");
        assert_eq!(payload, object.as_bytes());
        assert_eq!(signature, None);
        // A header that merely starts like it (`gpgsigx`) is no signature, and is left out of
        // the payload as git leaves it out.
        let object = format!("{TREE}{PEOPLE}gpgsigx y\n more\n\nm\n");
        let (payload, signature) = split_commit(object.as_bytes(), "gpgsig");
        assert_eq!(signature, None);
        assert_eq!(payload, format!("{TREE}{PEOPLE}\nm\n").as_bytes());
    }

    #[test]
    fn the_other_formats_signature_is_neither_signature_nor_payload() {
        let object = format!(
            "{TREE}{PEOPLE}gpgsig-sha256 S256\n s256 more\ngpgsig S1\n s1 more\nmergetag \
             object x\n tag\n\nmsg"
        );
        let (payload, signature) = split_commit(object.as_bytes(), "gpgsig");
        assert_eq!(signature.as_deref(), Some(&b"S1\ns1 more\n"[..]));
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            format!("{TREE}{PEOPLE}mergetag object x\n tag\n\nmsg")
        );
        let (payload, signature) = split_commit(object.as_bytes(), "gpgsig-sha256");
        assert_eq!(signature.as_deref(), Some(&b"S256\ns256 more\n"[..]));
        assert_eq!(
            String::from_utf8(payload).unwrap(),
            format!("{TREE}{PEOPLE}mergetag object x\n tag\n\nmsg")
        );
    }
}
