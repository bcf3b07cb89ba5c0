//! `loopctl`: run and observe iterative agent loops. The CLI parses and prints; the work is
//! done in `loopctl-core` (pure) and `loopctl-store` (files).

mod cmd;
mod output;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

// glibc's per-thread arenas grow and shrink with mprotect/madvise on every chunk of a parallel
// replay (12k syscalls and page refaults per GiB); mimalloc keeps freed pages for reuse.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Exit codes shared by every command, and their rules.
pub use loopctl_core::exit_codes as exit;

#[derive(Parser)]
#[command(
    name = "loopctl",
    version,
    about = "Run and observe iterative agent loops. The event log (history.jsonl) is the only source of truth.",
    long_about = "Run and observe iterative agent loops.\n\n\
        Every state loopctl shows (run.json, status, reports) is rebuilt by replaying the \
        append-only event log, history.jsonl. loopctl reads its own logs, aif-loop's \
        history.jsonl and Avenor's --on-event NDJSON, and tells them apart line by line.\n\n\
        RUN is a run folder (holding history.jsonl), a log file (.jsonl/.ndjson), or a run id or \
        alias of any run under the root, also inside a log holding several (--run-id picks a run \
        of a log); an alias several runs share is an error listing them. With no RUN: the run \
        current.json names, else the newest run under the root (docs/runs.md). The root is --root, else $LOOPCTL_ROOT, else .loopctl/, else \
        aif-loop's .ai-factory/evolution/ when that is what the current folder has.",
    after_help = "Exit codes: 0 ok, 1 findings (check; any command with --strict; a log that holds no event), \
        2 error, 3 a run stagnates (stagnation).\n\
        Examples:\n  loopctl check fixtures/bad-middle\n  loopctl recover .ai-factory/evolution/my-task\n  loopctl list --json | jq '.[] | select(.status==\"running\")'"
)]
struct Cli {
    /// Folder holding run folders (default: .loopctl/, or .ai-factory/evolution/).
    #[arg(long, global = true, env = "LOOPCTL_ROOT", value_name = "DIR")]
    root: Option<PathBuf>,
    /// Treat any finding (damaged line, seq problem, torn tail) as an error.
    #[arg(long, global = true)]
    strict: bool,
    /// Lines longer than this many bytes are reported and skipped.
    #[arg(long, global = true, default_value_t = loopctl_core::decode::lines::DEFAULT_MAX_LINE, value_parser = cmd::values::count_usize(), value_name = "BYTES")]
    max_line_bytes: usize,
    /// Threads used to replay large logs, 1 to 256 (default: all cores, at most 8).
    #[arg(long, global = true, value_parser = cmd::values::threads(), value_name = "N")]
    threads: Option<usize>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Replay(cmd::replay::Args),
    Recover(cmd::recover::Args),
    Check(cmd::check::Args),
    Status(cmd::status::Args),
    List(cmd::list::Args),
    History(cmd::history::Args),
    Run(cmd::run::RunArgs),
    Resume(cmd::run::ResumeArgs),
    Stop(cmd::stop::Args),
    Clean(cmd::clean::Args),
    Tail(cmd::tail::Args),
    Stagnation(cmd::stagnation::Args),
    Postmortem(cmd::postmortem::Args),
    Completions(cmd::docs::CompletionsArgs),
    Man(cmd::docs::ManArgs),
    Serve(cmd::serve::Args),
    Export(cmd::export::Args),
    #[cfg(feature = "analytics")]
    Aggregate(cmd::aggregate::Args),
    #[cfg(feature = "analytics")]
    Query(cmd::query::Args),
}

/// The command line, every command finished by `finish`.
fn command() -> clap::Command {
    finish(Cli::command())
}

/// Numeric options take a negative number as their value: clap would read `--limit -1` as an
/// unknown option `-1`; this way the value parser refuses it with its `invalid value` message
/// (docs/cli.md, "Numeric flags"). A description of one paragraph gets back, in `--help`, the
/// full stop clap's derive takes off it (kept off in `-h` and the list of commands).
fn finish(mut cmd: clap::Command) -> clap::Command {
    if cmd.get_long_about().is_none()
        && let Some(about) = cmd.get_about().map(|a| a.to_string())
        && !about.ends_with(['.', '?', '!'])
    {
        cmd = cmd.long_about(format!("{about}."));
    }
    cmd.mut_args(|a| {
        let numeric = is_numeric(&a);
        // `-1s` is no number to clap: a duration takes any value starting with a hyphen.
        let duration =
            a.get_value_parser().type_id() == std::any::TypeId::of::<std::time::Duration>();
        a.allow_negative_numbers(numeric)
            .allow_hyphen_values(duration)
    })
    .mut_subcommands(finish)
}

/// Whether `a` takes a number or a duration.
fn is_numeric(a: &clap::Arg) -> bool {
    use std::any::TypeId;
    let t = a.get_value_parser().type_id();
    a.get_num_args().is_none_or(|n| n.takes_values())
        && [
            TypeId::of::<u8>(),
            TypeId::of::<u16>(),
            TypeId::of::<u32>(),
            TypeId::of::<u64>(),
            TypeId::of::<usize>(),
            TypeId::of::<i64>(),
            TypeId::of::<f64>(),
            TypeId::of::<std::time::Duration>(),
        ]
        .iter()
        .any(|id| t == *id)
}

fn main() -> ExitCode {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    let ctx = cmd::Ctx::new(
        cli.root.as_deref(),
        cli.strict,
        cli.max_line_bytes,
        cli.threads,
    );
    let result = match cli.command {
        Command::Replay(a) => cmd::replay::run(&ctx, a),
        Command::Recover(a) => cmd::recover::run(&ctx, a),
        Command::Check(a) => cmd::check::run(&ctx, a),
        Command::Status(a) => cmd::status::run(&ctx, a),
        Command::List(a) => cmd::list::run(&ctx, a),
        Command::History(a) => cmd::history::run(&ctx, a),
        Command::Run(a) => cmd::run::run(&ctx, a),
        Command::Resume(a) => cmd::run::resume(&ctx, a),
        Command::Stop(a) => cmd::stop::run(&ctx, a),
        Command::Clean(a) => cmd::clean::run(&ctx, a),
        Command::Tail(a) => cmd::tail::run(&ctx, a),
        Command::Stagnation(a) => cmd::stagnation::run(&ctx, a),
        Command::Postmortem(a) => cmd::postmortem::run(&ctx, a),
        Command::Completions(a) => cmd::docs::completions(command(), a),
        Command::Man(a) => cmd::docs::man(command(), a),
        Command::Serve(a) => cmd::serve::run(&ctx, a),
        Command::Export(a) => cmd::export::run(&ctx, a),
        #[cfg(feature = "analytics")]
        Command::Aggregate(a) => cmd::aggregate::run(&ctx, a),
        #[cfg(feature = "analytics")]
        Command::Query(a) => cmd::query::run(&ctx, a),
    };
    match (result, output::stdout_failure()) {
        (Ok(_), Some(why)) => {
            output::error(&format!(
                "writing to stdout: {why}; the output is incomplete"
            ));
            ExitCode::from(exit::ERROR)
        }
        (Ok(code), None) => ExitCode::from(code),
        (Err(e), _) => {
            output::error(&format!("{e:#}"));
            ExitCode::from(exit::ERROR)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;

    /// Every option that takes a number, in every command, refuses a negative one with clap's
    /// `invalid value` message (a usage error), not "unexpected argument '-1'".
    #[test]
    fn every_numeric_option_refuses_a_negative_number_as_its_value() {
        fn walk(cmd: &clap::Command, path: &mut Vec<String>, seen: &mut Vec<String>) {
            for a in cmd.get_arguments().filter(|a| is_numeric(a)) {
                let flag = match (a.get_long(), a.get_short()) {
                    (Some(l), _) => format!("--{l}"),
                    (None, Some(s)) => format!("-{s}"),
                    (None, None) => continue,
                };
                for value in ["-1", "-0.5"] {
                    let mut argv = vec!["loopctl".to_string()];
                    argv.extend(path.iter().cloned());
                    argv.extend([flag.clone(), value.to_string()]);
                    let e = match command().try_get_matches_from(&argv) {
                        Ok(_) => panic!("{argv:?} accepted"),
                        Err(e) => e,
                    };
                    assert!(
                        matches!(
                            e.kind(),
                            ErrorKind::ValueValidation | ErrorKind::InvalidValue
                        ),
                        "{argv:?}: {e}"
                    );
                    assert!(e.to_string().contains("invalid value"), "{argv:?}: {e}");
                }
                seen.push(format!("{} {flag}", path.join(" ")));
            }
            for sub in cmd.get_subcommands() {
                path.push(sub.get_name().to_string());
                walk(sub, path, seen);
                path.pop();
            }
        }
        let mut seen = Vec::new();
        let mut cmd = command();
        cmd.build();
        walk(&cmd, &mut Vec::new(), &mut seen);
        for want in [
            "stagnation --min-delta",
            "tail --lines",
            "stop --wait",
            "run --max-retries",
            "serve --limit",
            " --threads",
        ] {
            assert!(seen.iter().any(|s| s.ends_with(want)), "{want}: {seen:?}");
        }
    }

    /// The options listed under a command's "Stagnation (as for `loopctl stagnation`)" help
    /// heading are `stagnation`'s own (an option declared after them fell under it).
    #[test]
    fn only_stagnation_options_are_listed_under_its_heading() {
        fn walk(cmd: &clap::Command, ours: &[String], path: &str) {
            for a in cmd.get_arguments() {
                if a.get_help_heading()
                    .is_some_and(|h| h.starts_with("Stagnation"))
                {
                    let id = a.get_id().to_string();
                    assert!(
                        ours.contains(&id),
                        "{path}: --{id} under {:?}",
                        a.get_help_heading()
                    );
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, ours, &format!("{path} {}", sub.get_name()));
            }
        }
        let cmd = command();
        let stagnation = cmd.find_subcommand("stagnation").unwrap();
        let ours: Vec<String> = stagnation
            .get_arguments()
            .map(|a| a.get_id().to_string())
            .collect();
        walk(&cmd, &ours, "loopctl");
    }

    /// Every command takes the global options after its name too (`loopctl list --root DIR`):
    /// none of its own arguments may shadow one.
    #[test]
    fn every_command_takes_the_global_options_after_its_name() {
        Cli::command().debug_assert();
        for sub in Cli::command().get_subcommands() {
            let name = sub.get_name();
            let argv = [
                "loopctl",
                name,
                "--root",
                "R",
                "--strict",
                "--max-line-bytes",
                "7",
                "--threads",
                "3",
            ];
            match Cli::try_parse_from(argv) {
                Ok(cli) => {
                    assert_eq!(
                        cli.root.as_deref(),
                        Some(std::path::Path::new("R")),
                        "{name}"
                    );
                    assert!(cli.strict, "{name}");
                    assert_eq!(cli.max_line_bytes, 7, "{name}");
                    assert_eq!(cli.threads, Some(3), "{name}");
                }
                // Commands with a required argument of their own (run's --loop-file), or a
                // required subcommand (export's format).
                Err(e) => assert!(
                    matches!(
                        e.kind(),
                        ErrorKind::MissingRequiredArgument | ErrorKind::MissingSubcommand
                    ),
                    "{name}: {e}"
                ),
            }
        }
    }
}
