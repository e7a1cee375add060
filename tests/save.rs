//! `save`: staging and committing (see `push` for the push half).
