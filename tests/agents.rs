//! Several agents in one repository (`git-session agent add|list|remove`): each agent's linked
//! work tree, on its own session branch with its own lease and ledger, checked with the git CLI
//! against git's http-backend.

use std::path::{Path, PathBuf};

use crate::push::Setup;
use crate::support::{Run, zero_id};

const BRANCH: &str = "sessions/main";

impl Setup {
    /// The session `sessions/main` (new on the server) restored at the seed's second commit into
    /// `main`.
    fn main_tree(&self) -> PathBuf {
        self.sandbox("main", BRANCH, &self.ids[1])
    }

    fn agent(&self, main: &Path, args: &[&str]) -> Run {
        self.w
            .run(main, &[&["agent"][..], args, &["--json"]].concat(), &[])
    }

    /// `agent add NAME`, which must succeed; the agent's folder.
    fn add_agent(&self, main: &Path, name: &str) -> PathBuf {
        let run = self.agent(main, &["add", name]);
        run.assert_code(0);
        PathBuf::from(run.json()["dir"].as_str().unwrap())
    }

    fn save_in(&self, dir: &Path, message: &str) -> Run {
        let url = self.url();
        self.w.run(
            dir,
            &["save", "-m", message, "--json"],
            &[("PUSH_URL", url.as_str()), ("READ_URL", url.as_str())],
        )
    }
}

/// `agent add` makes a linked work tree git knows (`git worktree list`), on `<session>-<NAME>` at
/// the session's tip, its files equal to the commit and `git status` clean at once; `agent list`
/// shows it; `agent remove` takes it away, with its branch (nothing was unpushed).
#[test]
fn add_list_remove_round_trip() {
    let s = Setup::new();
    let main = s.main_tree();
    let run = s.agent(&main, &["add", "reviewer"]);
    run.assert_code(0);
    let json = run.json();
    let dir = PathBuf::from(json["dir"].as_str().unwrap());
    assert_eq!(
        dir,
        main.with_file_name("main-reviewer").canonicalize().unwrap()
    );
    assert_eq!(json["agent_branch"], "sessions/main-reviewer");
    assert_eq!(json["start"], s.ids[1].as_str());
    assert_eq!(json["lease"], zero_id().as_str());
    let files = json["copied"].as_u64().unwrap() + json["written"].as_u64().unwrap();
    assert_eq!(files, 4, "{json}");
    assert!(json["copied"].as_u64().unwrap() >= 1, "{json}");
    crate::support::assert_matches_schema(&json);

    let list = s.w.git(&main, &["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(&format!("worktree {}", dir.display())),
        "{list}"
    );
    assert!(
        list.contains("branch refs/heads/sessions/main-reviewer"),
        "{list}"
    );
    assert_eq!(s.w.git(&dir, &["status", "--porcelain"]), "");
    s.w.git(&dir, &["diff", "--quiet", "HEAD"]);
    assert_eq!(s.w.git(&dir, &["rev-parse", "HEAD"]), s.ids[1]);
    assert_eq!(
        s.w.git(&dir, &["symbolic-ref", "HEAD"]),
        "refs/heads/sessions/main-reviewer"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("README.md")).unwrap(),
        "two\n"
    );

    let listed = s.agent(&main, &["list"]);
    listed.assert_code(0);
    let agents = listed.json()["agents"].clone();
    assert_eq!(agents.as_array().unwrap().len(), 1, "{agents}");
    assert_eq!(agents[0]["name"], "reviewer");
    assert_eq!(agents[0]["ahead"], 0);
    assert_eq!(agents[0]["changed"], 0);
    crate::support::assert_matches_schema(&listed.json());

    s.agent(&main, &["remove", "reviewer"]).assert_code(0);
    assert!(!dir.exists());
    let list = s.w.git(&main, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains("reviewer"), "{list}");
    let branches =
        s.w.git(&main, &["branch", "--list", "sessions/main-reviewer"]);
    assert_eq!(branches, "");
}
