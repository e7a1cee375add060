//! A smart-HTTP upload-pack client: one ref looked up, one commit fetched, over protocol v2 or,
//! from a server that speaks nothing newer, v0/v1 ([`v0`]).
//!
//! Follows git's `gitprotocol-http` ("Smart Clients": `GET $GIT_URL/info/refs?service=git-upload-pack`
//! with `Git-Protocol: version=2`, then `POST $GIT_URL/git-upload-pack`) and `gitprotocol-v2`
//! (`ls-refs` with `ref-prefix`, `fetch` with `want`, `deepen`, `done`; response sections
//! `shallow-info` and `packfile` with side-band). A server that answers the first request with a
//! ref advertisement instead of `version 2` speaks v0/v1: the branch comes from that
//! advertisement and the fetch is one stateless request ([`v0`]). Pkt-lines are read and written
//! with gix-packetline; the pack is indexed as it streams in ([`crate::pack::receive()`], on
//! gix-pack).
//!
//! The steps, each in its file:
//! 1. `handshake`: [`handshake()`], the first request; its answer, a [`Server`], goes to every
//!    step.
//! 2. `ls_refs`: [`ls_ref`], where the session branch is.
//!
//! Steps 1 and 2 in one request over protocol v2 (`posted`): [`connect`] posts the `ls-refs`
//! without the capability advertisement and falls back to the handshake when the answer is not
//! v2's ([`Server::Assumed`]).
//! 3. `fetch`: [`fetch_pack`], a [`Want`] sent as the `fetch` request; its answer read by
//!    `response` (the sections before the pack), then `packfile` (the pack into `crate::pack`),
//!    into [`Fetched`]. Over v0/v1, [`v0`] sends its own request and reads the lines before the
//!    same `packfile`.
//!
//! Below them: `want` (what a fetch asks for and brings), `request` (the headers, a v2 command's
//! body, the POST of a fetch) and `lines` (the readers both protocols share, the server's errors).

mod fetch;
mod handshake;
mod lines;
mod ls_refs;
mod packfile;
mod posted;
mod request;
mod response;
pub mod v0;
mod want;

pub use self::fetch::fetch_pack;
pub(crate) use self::handshake::read_advertisement;
pub use self::handshake::{Capabilities, Server, fetch_supports, handshake};
pub use self::lines::MAX_SECTION_BYTES;
pub(crate) use self::ls_refs::read_ls_refs;
pub use self::ls_refs::{MAX_LS_REFS_BYTES, ls_ref};
pub use self::posted::{Connected, assumed, connect};
pub(crate) use self::response::read_fetch;
pub(crate) use self::v0::read_fetch_v0;
pub use self::want::{Base, Fetched, Want};
