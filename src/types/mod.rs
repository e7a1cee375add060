//! Session inputs parsed once into types, so the contract's rules cannot be skipped.

pub mod agent;
mod branch;
pub mod lfs;
mod message;
mod owner;
pub mod sha;
mod url;

pub use agent::{AgentName, AgentNameError};
pub use branch::{BranchError, SessionBranch};
pub use message::{CommitMessage, MessageError};
pub use owner::{MAX_OWNER_BYTES, OWNER_FIELDS, Owner, OwnerError};
pub use sha::{
    Format, FullSha, ShaError, WrongFormat, format_from_name, format_name, format_title,
};
pub use url::{
    Credentials, MAX_JWT_EXPIRY, MAX_URL_FILE, RemoteUrl, Secret, UrlError, read_url_file,
};
