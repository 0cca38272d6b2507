"""numatune completion: print the shell's completion script (click's, driven by _NUMATUNE_COMPLETE)."""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion_cmd(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL; turn completion on by evaluating it in the shell's start-up file.

    \b
      bash: eval "$(numatune completion bash)"     in ~/.bashrc
      zsh:  eval "$(numatune completion zsh)"      in ~/.zshrc
      fish: numatune completion fish > ~/.config/fish/completions/numatune.fish
    """
    from click.shell_completion import get_completion_class

    group = ctx.find_root().command
    comp = get_completion_class(shell)(group, {}, "numatune", "_NUMATUNE_COMPLETE")
    click.echo(comp.source())
