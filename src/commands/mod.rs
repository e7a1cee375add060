//! One file per command: each validates its inputs, runs its data flow and returns an
//! [`output::Success`](crate::output::Success).

pub mod push;
pub mod restore;
pub mod save;
