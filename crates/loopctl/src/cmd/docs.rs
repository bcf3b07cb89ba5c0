//! `loopctl completions SHELL` and `loopctl man`: shell completions and man pages, generated
//! from the same argument definitions the parser uses, so they never drift from the CLI.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args as ClapArgs;
use clap_complete::Shell;

/// Print a shell completion script on stdout.
#[derive(ClapArgs)]
#[command(after_help = "\
Install:
  bash: loopctl completions bash > ~/.local/share/bash-completion/completions/loopctl
  zsh:  loopctl completions zsh > ~/.zfunc/_loopctl   (with fpath+=~/.zfunc before compinit)
  fish: loopctl completions fish > ~/.config/fish/completions/loopctl.fish")]
pub struct CompletionsArgs {
    #[arg(value_enum)]
    shell: Shell,
}

/// Print loopctl's man page (roff) on stdout, or write one page per command into a folder.
#[derive(ClapArgs)]
#[command(after_help = "\
Examples:
  loopctl man | man -l -
  loopctl man --out /usr/local/share/man/man1   # loopctl.1, loopctl-list.1, ...")]
pub struct ManArgs {
    /// Write loopctl.1 and a loopctl-COMMAND.1 page for every command into DIR (created if
    /// missing) instead of printing loopctl.1.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

pub fn completions(mut cli: clap::Command, a: CompletionsArgs) -> anyhow::Result<u8> {
    let name = cli.get_name().to_string();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cli, name, &mut out);
    write_stdout(&out)
}

pub fn man(cli: clap::Command, a: ManArgs) -> anyhow::Result<u8> {
    let Some(dir) = a.out else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cli).render(&mut out)?;
        return write_stdout(&out);
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(cli, &dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    crate::output::print(&format!("wrote man pages into {}\n", dir.display()));
    Ok(crate::exit::OK)
}

/// Generated text, as is (a failed write is said by `main`).
fn write_stdout(bytes: &[u8]) -> anyhow::Result<u8> {
    crate::output::write_stdout(bytes);
    Ok(crate::exit::OK)
}
