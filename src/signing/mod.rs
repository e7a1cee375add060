//! Commit signing: the SSH signature (SSHSIG) git writes into a commit's `gpgsig` header for
//! `gpg.format = ssh`, made and checked with RustCrypto's `ssh-key` (no cryptography here).
//!
//! [`SigningKey`] is an OpenSSH private key read from a file (`SIGNING_KEY_FILE`) at each use; it
//! signs a payload as `ssh-keygen -Y sign -n git` does (namespace `git`, SHA-512). [`PublicKey`]
//! checks such a signature against one key (a signing service's answer against
//! `SIGNING_PUBLIC_KEY`). Callers name the variable; this module reads no environment.
//! Every failure is an [`Error::Signing`](crate::error::Error::Signing) (exit 11) naming its
//! [`SigningCause`](crate::error::SigningCause) and the variable; the key's bytes are zeroed
//! after use and never reach a message or a `Debug`.

mod format;
mod key;
mod public;
mod rsa_sign;

pub use format::{KeyDescription, NAMESPACE};
pub use key::{MAX_KEY_FILE, SigningKey};
pub use public::PublicKey;
