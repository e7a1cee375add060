//! Integration tests: the `git-session` binary against a real `git http-backend` on 127.0.0.1,
//! results judged by the git CLI.

// Test output is for the person running the tests, not the product's stderr (see clippy.toml).
#![allow(clippy::disallowed_macros, clippy::disallowed_methods)]

mod support;

/// The test allocator (`git_session::alloc_limit`) for everything this binary runs in process.
#[global_allocator]
static ALLOC: git_session::alloc_limit::Limited = git_session::alloc_limit::Limited::new();

mod agents;
mod alloc_limit;
mod archive_git;
mod bake;
mod boot_at_base;
mod cli;
mod docs;
mod early_checkout;
mod fuzz_corpus;
mod handoff;
mod hints;
mod hostile;
mod inputs;
mod lease;
mod lfs;
mod local_faults;
mod manifest;
mod manifest_save;
mod pack_thin;
mod posted_lies;
mod proxy;
mod push;
mod reflink;
mod restore_archive;
mod restore_git;
mod root;
mod save;
mod servers;
mod signed_git;
mod signed_required;
mod signed_save;
mod signed_service;
mod signing;
mod slow_server;
mod sparse;
mod submodules;
mod text;
mod trust;
