//! The only values `save` takes from git configuration outside the repository (SPEC rule 8):
//! `user.name`, `user.email` and `core.excludesFile`, read from the files git would read, in git's
//! order of precedence (system < XDG < global < repository-local), and nothing else.
//!
//! Identities for the commit come from `GIT_AUTHOR_*`/`GIT_COMMITTER_*`, else those values, else
//! `git-session <git-session@localhost>`, like git-commit-tree(1) "Commit Information".

use std::path::{Path, PathBuf};

use gix::bstr::{BString, ByteSlice};
use gix::config::{Source, path::interpolate};

use crate::error::{Error, Refusal, Result};

/// The name used when neither the environment nor the configuration names an identity.
pub const DEFAULT_NAME: &str = "git-session";
/// The email used when neither the environment nor the configuration names one.
pub const DEFAULT_EMAIL: &str = "git-session@localhost";

/// The three values of user, system and local configuration that `save` uses.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct UserConfig {
    /// `user.name`.
    pub name: Option<BString>,
    /// `user.email`.
    pub email: Option<BString>,
    /// The resolved path of `core.excludesFile` (`~/` expanded, relative paths against the work
    /// tree), or git's default `$XDG_CONFIG_HOME/git/ignore` (`~/.config/git/ignore`).
    pub excludes_file: Option<PathBuf>,
    /// Configuration files that could not be parsed (and were skipped).
    pub warnings: Vec<String>,
}

/// Reads environment variables; a seam for tests.
pub trait Env {
    /// The value of `name`, if set.
    fn var(&self, name: &str) -> Option<std::ffi::OsString>;
}

/// The most of a git configuration file read (git's own are a few KiB).
const CONFIG_CAP: u64 = 16 << 20;

/// The process environment.
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<std::ffi::OsString> {
        std::env::var_os(name)
    }
}

impl UserConfig {
    /// Read the values from system, XDG, global and the repository's own config (`git_dir/config`),
    /// later files winning.
    pub fn load(git_dir: &Path, workdir: &Path, env: &dyn Env) -> Self {
        let mut out = UserConfig::default();
        let mut excludes: Option<BString> = None;
        for (path, source) in config_files(git_dir, env) {
            let bytes = match crate::fs::read_regular(&path, true, CONFIG_CAP) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                    out.warnings.push(format!(
                        "ignored the git configuration file {} ({e})",
                        path.display()
                    ));
                    continue;
                }
                // Missing (or unreadable, e.g. a directory) files are skipped, as git does for
                // the optional user and system files.
                Err(_) => continue,
            };
            let meta = gix::config::file::Metadata::from(source).at(&path);
            let file =
                match gix::config::File::from_bytes_no_includes(&bytes, meta, Default::default()) {
                    Ok(f) => f,
                    Err(e) => {
                        out.warnings.push(format!(
                            "ignored the git configuration file {} (it does not parse: {e})",
                            path.display()
                        ));
                        continue;
                    }
                };
            if let Some(v) = file.string("user.name") {
                out.name = Some(v.clone());
            }
            if let Some(v) = file.string("user.email") {
                out.email = Some(v.clone());
            }
            if let Some(v) = file.string("core.excludesFile") {
                excludes = Some(v.clone());
            }
        }
        out.excludes_file = match excludes {
            // An empty value switches the file off.
            Some(v) if v.trim().is_empty() => None,
            Some(v) => resolve_path(v.as_bstr(), workdir, env),
            None => default_excludes_file(env),
        };
        out
    }
}

/// The config files git reads, lowest precedence first: system, XDG, global, the repository's own
/// (no `config.worktree`). `GIT_CONFIG_GLOBAL` names one file for both XDG and global: read once.
fn config_files(git_dir: &Path, env: &dyn Env) -> Vec<(PathBuf, Source)> {
    let mut files: Vec<(PathBuf, Source)> = Vec::new();
    for source in [Source::System, Source::Git, Source::User, Source::Local] {
        let Some(path) = source.storage_location(&mut var_if_set(env)) else {
            continue;
        };
        // The repository's own file is named relative to the git directory.
        let path = match source {
            Source::Local => git_dir.join(path),
            _ => path,
        };
        files.retain(|(seen, _)| *seen != path);
        files.push((path, source));
    }
    files
}

/// git's default `core.excludesFile`, `ignore` beside the XDG config file:
/// `$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`.
fn default_excludes_file(env: &dyn Env) -> Option<PathBuf> {
    let mut var = var_if_set(env);
    let mut xdg_only = |name: &str| (name != "GIT_CONFIG_GLOBAL").then(|| var(name)).flatten();
    Source::Git
        .storage_location(&mut xdg_only)
        .map(|config| config.with_file_name("ignore"))
}

/// The environment as gix reads it, an empty variable counting as unset.
fn var_if_set(env: &dyn Env) -> impl FnMut(&str) -> Option<std::ffi::OsString> + '_ {
    |name| env.var(name).filter(|v| !v.is_empty())
}

/// `core.excludesFile` as a path: `~/`, `~user/` and a lone `~` expanded as git does, a relative
/// path taken relative to the work tree (where git runs its commands from). `None` when it cannot
/// be expanded (no `$HOME`, unknown user, `%(prefix)/`).
fn resolve_path(value: &gix::bstr::BStr, workdir: &Path, env: &dyn Env) -> Option<PathBuf> {
    let home = var_if_set(env)("HOME").map(PathBuf::from);
    let context = interpolate::Context {
        home_dir: home.as_deref(),
        ..Default::default()
    };
    let path = gix::config::Path::from(value.trim().as_bstr())
        .interpolate(context)
        .ok()?;
    // An absolute path replaces the work tree.
    Some(workdir.join(path))
}

/// Which identity of a commit.
#[derive(Debug, Clone, Copy)]
pub enum Role {
    /// `GIT_AUTHOR_*`.
    Author,
    /// `GIT_COMMITTER_*`.
    Committer,
}

impl Role {
    fn prefix(self) -> &'static str {
        match self {
            Role::Author => "GIT_AUTHOR",
            Role::Committer => "GIT_COMMITTER",
        }
    }
}

/// The signature for `role`: name, email and date from the environment, else the configuration,
/// else the defaults; the date defaults to now.
///
/// # Errors
/// [`Error::Usage`] when `GIT_<ROLE>_DATE` is set but not a date git would accept.
pub fn signature(
    role: Role,
    cfg: &UserConfig,
    env: &dyn Env,
    now: gix::date::Time,
) -> Result<gix::actor::Signature> {
    let prefix = role.prefix();
    let var = |suffix: &str| -> Option<BString> {
        env.var(&format!("{prefix}_{suffix}"))
            .map(|v| BString::from(std::os::unix::ffi::OsStringExt::into_vec(v)))
            .map(|v| sanitize(v.as_bstr()))
            .filter(|v| !v.is_empty())
    };
    let name = var("NAME")
        .or_else(|| {
            cfg.name
                .as_ref()
                .map(|n| sanitize(n.as_bstr()))
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_NAME.into());
    let email = var("EMAIL")
        .or_else(|| {
            cfg.email
                .as_ref()
                .map(|e| sanitize(e.as_bstr()))
                .filter(|e| !e.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_EMAIL.into());
    let time = match env.var(&format!("{prefix}_DATE")) {
        Some(raw) if !raw.is_empty() => {
            let raw = raw.to_string_lossy();
            parse_date(&raw).ok_or_else(|| {
                Error::Usage(Refusal::Invalid, format!(
                    "{prefix}_DATE is not a date git understands: '{raw}' (use e.g. 2026-01-01T12:00:00+02:00 or '@1767225600 +0000')"
                ))
            })?
        }
        _ => now,
    };
    Ok(gix::actor::Signature { name, email, time })
}

/// Strip what git strips from identities: surrounding whitespace and the characters `<`, `>` and
/// newlines that would break the commit header.
fn sanitize(v: &gix::bstr::BStr) -> BString {
    let cleaned: Vec<u8> = v
        .iter()
        .copied()
        .filter(|b| !matches!(b, b'<' | b'>' | b'\n' | b'\r' | 0))
        .collect();
    cleaned.trim().into()
}

/// Parse a date as git does for `GIT_AUTHOR_DATE`, with `gix::date::parse`: RFC 3339 / ISO 8601
/// (`2026-01-01T00:00:00Z`, with or without `T`, offsets `Z`, `+hh:mm`, `+hhmm`), `@<unix> <tz>`,
/// `<unix> <tz>`, RFC 2822. No relative dates (`yesterday`, `2 days ago`): git refuses them there.
pub fn parse_date(raw: &str) -> Option<gix::date::Time> {
    let raw = raw.trim();
    let (input, carried) = iso_in_gix_range(raw).unwrap_or_else(|| (raw.to_owned(), 0));
    let t = gix::date::parse(&input, None).ok()?;
    Some(gix::date::Time::new(
        t.seconds.checked_add(carried)?,
        t.offset,
    ))
}

/// gix reads ISO 8601 more strictly than git, which also takes a lowercase `t` and `z`, second 60
/// and a day past the end of its month (`2026-02-30` is March 2nd). `YYYY-MM-DD?HH:MM:SS…` gets
/// day 01, second 00 and upper case, with the seconds that moved, to be added back.
fn iso_in_gix_range(s: &str) -> Option<(String, i64)> {
    let b = s.as_bytes();
    let two_digits = |i: usize| match b.get(i..i + 2)? {
        &[t, u] if t.is_ascii_digit() && u.is_ascii_digit() => {
            Some(i64::from((t - b'0') * 10 + u - b'0'))
        }
        _ => None,
    };
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || b.get(16) != Some(&b':') {
        return None;
    }
    let (day, second) = (two_digits(8)?, two_digits(17)?);
    if !(1..=31).contains(&day) || second > 60 {
        return None;
    }
    let mut s = s.to_ascii_uppercase();
    s.replace_range(8..10, "01");
    s.replace_range(17..19, "00");
    Some((s, (day - 1) * 86_400 + second))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, String>);

    impl Env for MapEnv {
        fn var(&self, name: &str) -> Option<std::ffi::OsString> {
            self.0.get(name).map(Into::into)
        }
    }

    fn env(pairs: &[(&'static str, &str)]) -> MapEnv {
        MapEnv(pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect())
    }

    #[test]
    fn dates_in_git_formats() {
        let t = parse_date("2026-01-01T00:00:00Z").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 0));
        let t = parse_date("2026-01-01T02:00:00+02:00").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 7200));
        let t = parse_date("2026-01-01 02:00:00 +0200").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 7200));
        let t = parse_date("2025-12-31T19:00:00.123-05:00").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, -18000));
        let t = parse_date("@1767225600 +0100").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 3600));
        let t = parse_date("1767225600 -0130").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, -5400));
        let t = parse_date("Thu, 01 Jan 2026 00:00:00 +0000").unwrap();
        assert_eq!((t.seconds, t.offset), (1_767_225_600, 0));
        let t = parse_date("1970-01-01T00:00:00Z").unwrap();
        assert_eq!(t.seconds, 0);
        assert!(parse_date("not a date").is_none());
        assert!(parse_date("2026-13-01T00:00:00Z").is_none());

        // More of git's formats, each as `git commit-tree` records it in GIT_COMMITTER_DATE.
        for (raw, seconds, offset) in [
            ("2026-01-01T02:00:00+0200", 1_767_225_600, 7200),
            ("2026-01-01T02:00:00 +02:00", 1_767_225_600, 7200),
            ("2026-01-01 02:00:00+02", 1_767_225_600, 7200),
            ("2026-01-01T00:00:00+23:59", 1_767_139_260, 86_340),
            ("Thu Jan 1 00:00:00 2026 +0000", 1_767_225_600, 0),
            ("Thu, 1 Jan 2026 01:00:00 +0100", 1_767_225_600, 3600),
            ("@0 +0000", 0, 0),
        ] {
            let t = parse_date(raw).unwrap_or_else(|| panic!("{raw}"));
            assert_eq!((t.seconds, t.offset), (seconds, offset), "{raw}");
        }
        // gix alone refuses these (lowercase `t`/`z`, second 60, a day past the month's end); the
        // committer date `git cat-file -p` shows for each.
        for (raw, git) in [
            ("2026-01-01t00:00:00z", "1767225600 +0000"),
            ("2026-01-01T00:00:60Z", "1767225660 +0000"),
            ("2026-12-31T23:59:60.5+01:00", "1798758000 +0100"),
            ("2026-02-30T00:00:00Z", "1772409600 +0000"),
            ("2026-04-31 12:00:00 +0200", "1777629600 +0200"),
        ] {
            let t = parse_date(raw).unwrap_or_else(|| panic!("{raw}"));
            assert_eq!(t.format(gix::date::time::Format::Raw).unwrap(), git);
        }
        // git refuses these, relative dates included.
        for raw in [
            "yesterday",
            "now",
            "2 days ago",
            "2026-01-32T00:00:00Z",
            "2026-01-00T00:00:00Z",
        ] {
            assert!(parse_date(raw).is_none(), "{raw}");
        }
    }

    #[test]
    fn identity_precedence() {
        let now = gix::date::Time::new(1, 0);
        let cfg = UserConfig {
            name: Some("Cfg Name".into()),
            email: Some("cfg@example.com".into()),
            ..Default::default()
        };
        let e = env(&[
            ("GIT_AUTHOR_NAME", "Env <Name>"),
            ("GIT_COMMITTER_EMAIL", " c@x "),
        ]);
        let a = signature(Role::Author, &cfg, &e, now).unwrap();
        assert_eq!(
            (a.name.as_bstr(), a.email.as_bstr()),
            ("Env Name".into(), "cfg@example.com".into())
        );
        let c = signature(Role::Committer, &cfg, &e, now).unwrap();
        assert_eq!(
            (c.name.as_bstr(), c.email.as_bstr()),
            ("Cfg Name".into(), "c@x".into())
        );
        let d = signature(
            Role::Author,
            &UserConfig::default(),
            &env(&[("GIT_AUTHOR_NAME", "")]),
            now,
        )
        .unwrap();
        assert_eq!(d.name, DEFAULT_NAME);
        assert_eq!(d.email, DEFAULT_EMAIL);
        assert_eq!(d.time, now);
        let bad = signature(
            Role::Author,
            &cfg,
            &env(&[("GIT_AUTHOR_DATE", "yesterday-ish")]),
            now,
        );
        assert!(matches!(bad, Err(Error::Usage(..))));
    }

    #[test]
    fn reads_only_the_three_values_in_precedence_order() {
        let tmp = tempfile::tempdir().unwrap();
        let git_dir = tmp.path().join(".git");
        std::fs::create_dir_all(&git_dir).unwrap();
        let system = tmp.path().join("system");
        let global = tmp.path().join("global");
        std::fs::write(
            &system,
            "[user]\n\tname = System\n\temail = sys@x\n[core]\n\texcludesFile = /sys/ignore\n",
        )
        .unwrap();
        std::fs::write(
            &global,
            "[user]\n\tname = Global\n[core]\n\texcludesFile = ~/my-ignore\n",
        )
        .unwrap();
        std::fs::write(git_dir.join("config"), "[core]\n\tbare = false\n").unwrap();
        let e = env(&[
            ("GIT_CONFIG_SYSTEM", system.to_str().unwrap()),
            ("GIT_CONFIG_GLOBAL", global.to_str().unwrap()),
            ("HOME", "/home/u"),
        ]);
        let cfg = UserConfig::load(&git_dir, tmp.path(), &e);
        assert_eq!(cfg.name, Some("Global".into()));
        assert_eq!(cfg.email, Some("sys@x".into()));
        assert_eq!(
            cfg.excludes_file.as_deref(),
            Some(Path::new("/home/u/my-ignore"))
        );

        // GIT_CONFIG_NOSYSTEM drops the system file; the local file wins over the global one.
        std::fs::write(
            git_dir.join("config"),
            "[core]\n\texcludesFile = rel/ignore\n",
        )
        .unwrap();
        let mut e2 = e.0.clone();
        e2.insert("GIT_CONFIG_NOSYSTEM", "1".into());
        let cfg = UserConfig::load(&git_dir, tmp.path(), &MapEnv(e2));
        assert_eq!(cfg.email, None);
        assert_eq!(cfg.excludes_file, Some(tmp.path().join("rel/ignore")));

        // Nothing configured: git's default file below XDG_CONFIG_HOME.
        std::fs::write(git_dir.join("config"), "").unwrap();
        let cfg = UserConfig::load(
            &git_dir,
            tmp.path(),
            &env(&[("HOME", "/h"), ("GIT_CONFIG_NOSYSTEM", "1")]),
        );
        assert_eq!(
            cfg.excludes_file.as_deref(),
            Some(Path::new("/h/.config/git/ignore"))
        );
        let cfg = UserConfig::load(
            &git_dir,
            tmp.path(),
            &env(&[
                ("HOME", "/h"),
                ("XDG_CONFIG_HOME", "/x"),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ]),
        );
        assert_eq!(
            cfg.excludes_file.as_deref(),
            Some(Path::new("/x/git/ignore"))
        );
    }

    #[test]
    fn environment_switches_and_empty_variables() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, git_dir) = (tmp.path().join("home"), tmp.path().join(".git"));
        std::fs::create_dir_all(home.join(".config/git")).unwrap();
        std::fs::create_dir_all(&git_dir).unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n\tname = Home\n").unwrap();
        std::fs::write(home.join(".config/git/config"), "[user]\n\temail = xdg@x\n").unwrap();
        let (system, broken) = (tmp.path().join("system"), tmp.path().join("broken"));
        std::fs::write(&system, "[core]\n\texcludesFile = ~\n").unwrap();
        std::fs::write(&broken, "[user\n").unwrap();
        let home = home.to_str().unwrap();
        let system = system.to_str().unwrap();

        // An empty GIT_CONFIG_GLOBAL counts as unset (git would read no global file): the XDG and
        // home files are read.
        let cfg = UserConfig::load(
            &git_dir,
            tmp.path(),
            &env(&[
                ("HOME", home),
                ("GIT_CONFIG_GLOBAL", ""),
                ("GIT_CONFIG_SYSTEM", system),
            ]),
        );
        assert_eq!(
            (cfg.name, cfg.email),
            (Some("Home".into()), Some("xdg@x".into()))
        );
        assert_eq!(cfg.excludes_file.as_deref(), Some(Path::new(home)));

        // GIT_CONFIG_NOSYSTEM is a git boolean.
        for (value, reads_system) in [
            ("1", true),
            ("true", true),
            ("yes", true),
            ("on", true),
            ("0", false),
            ("false", false),
            ("", false),
        ] {
            let e = env(&[
                ("HOME", home),
                ("GIT_CONFIG_SYSTEM", system),
                ("GIT_CONFIG_NOSYSTEM", value),
            ]);
            let cfg = UserConfig::load(&git_dir, tmp.path(), &e);
            let from_system = cfg.excludes_file.as_deref() == Some(Path::new(home));
            assert_eq!(from_system, !reads_system, "GIT_CONFIG_NOSYSTEM={value}");
        }

        // GIT_CONFIG_GLOBAL stands for both the XDG and the home file, and is read once.
        let cfg = UserConfig::load(
            &git_dir,
            tmp.path(),
            &env(&[
                ("HOME", home),
                ("GIT_CONFIG_GLOBAL", broken.to_str().unwrap()),
                ("GIT_CONFIG_NOSYSTEM", "1"),
            ]),
        );
        assert_eq!((cfg.name, cfg.email, cfg.warnings.len()), (None, None, 1));

        // `~` needs a home: none, no file.
        std::fs::write(
            git_dir.join("config"),
            "[core]\n\texcludesFile = ~/ignore\n",
        )
        .unwrap();
        let cfg = UserConfig::load(
            &git_dir,
            tmp.path(),
            &env(&[("HOME", ""), ("GIT_CONFIG_NOSYSTEM", "1")]),
        );
        assert_eq!(cfg.excludes_file, None);
    }
}
