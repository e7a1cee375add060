//! Steps 1 and 2 of a fetch, shared by the cold restore (`git.rs`) and the boot of a baked
//! template (`boot/`): where the session branch is, and what the server speaks.

use super::options::RestoreOptions;
use crate::error::Result;
use crate::wire::http::Http;
use crate::wire::upload_pack as fetch;

/// Steps 1 and 2 of the wire ([`fetch::connect`]): the `ls-refs` of the session branch posted
/// straight to upload-pack where `post` (falling back to the handshake when the answer is not
/// protocol v2's), else the handshake alone; `TIP_SHA` checked against the server's format.
///
/// # Errors
/// As [`fetch::connect`], after the retries; usage (2) for a `TIP_SHA` of another format.
pub(super) fn connect(
    http: &Http,
    read: &crate::wire::http::UrlSource,
    opts: &RestoreOptions,
    post: bool,
) -> Result<fetch::Connected> {
    let post = post && http.protocol != crate::wire::http::Protocol::V0;
    if opts.template && post {
        // A template has no session branch to look up: its fetch is the first request, with
        // the capabilities of protocol v2 assumed (a server that refuses it gets the handshake).
        return Ok(fetch::Connected {
            server: fetch::assumed(opts.tip.format(), &opts.branch),
            tip: None,
        });
    }
    // Once the posted request was not answered as v2, the retries go to the handshake.
    let post = std::cell::Cell::new(post);
    http.with_retries(read, "asking the server what it speaks", |url| {
        let connected = fetch::connect(http, url, &opts.branch, opts.tip.format(), &post)?;
        connected.server.check_tip(url, "TIP_SHA", opts.tip)?;
        Ok(connected)
    })
}

/// Steps 1 and 2 of a boot whose template's bake found the server taking requests posted
/// without the capability advertisement (`posted_v2`): nothing is asked yet. The fetch goes
/// with the assumed capabilities of protocol v2 (a server that refuses it gets the handshake,
/// [`fetch::fetch_pack`]), while [`lease`] looks the session branch up beside it: two requests
/// at once instead of one after the other. `None` when the boot asks first ([`connect`]):
/// protocol v0 forced, or a template baked before this was recorded or against a server that
/// needed the handshake.
pub(super) fn at_once(
    http: &Http,
    opts: &RestoreOptions,
    posted_v2: bool,
) -> Option<fetch::Connected> {
    (posted_v2 && http.protocol != crate::wire::http::Protocol::V0).then(|| fetch::Connected {
        server: fetch::assumed(opts.tip.format(), &opts.branch),
        tip: None,
    })
}

/// Where the session branch is on the server (`None`: no such branch), for a boot whose fetch
/// is on its way already ([`at_once`]): the posted `ls-refs` ([`connect`]), or after the
/// handshake a server that did not take it needs, that server's answer.
///
/// # Errors
/// As [`connect`] and [`fetch::ls_ref`], after the retries.
pub(super) fn lease(
    http: &Http,
    read: &crate::wire::http::UrlSource,
    opts: &RestoreOptions,
) -> Result<Option<crate::types::FullSha>> {
    let connected = connect(http, read, opts, true)?;
    match connected.tip {
        Some(tip) => Ok(tip),
        None => http.with_retries(read, "looking up the session branch", |url| {
            fetch::ls_ref(http, url, &connected.server, &opts.branch)
        }),
    }
}
