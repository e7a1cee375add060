// .opencode/plugins/git-session.js (or ~/.config/opencode/plugins/): OpenCode loads every .js/.ts file
// there. On `session.idle` (the agent finished responding) it saves the work; a failed save is shown,
// never thrown (exit 3: another sandbox owns the session).
export const GitSessionSave = async ({ $, directory }) => ({
  event: async ({ event }) => {
    if (event.type !== "session.idle") return
    const out = await $`git-session -C ${directory} save -m ${"Checkpoint after an OpenCode turn"} --json`
      .env({ ...process.env, GIT_SESSION_AGENT: process.env.GIT_SESSION_AGENT ?? "opencode" })
      .nothrow()
      .quiet()
    if (out.exitCode !== 0) console.error(`git-session save exited ${out.exitCode}: ${out.stderr}`)
  },
})
