"""numatune check."""

from __future__ import annotations

from pathlib import Path

import click

from numatune.cli._app import App
from numatune.cli._options import format_option

FAIL_ON = ("info", "warning", "error")


@click.command("check")
@click.option("--policy", "-p", "policy_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Policy file (numatune.toml) with the node's expected shape and settings.")
@click.option("--fail-on", type=click.Choice(FAIL_ON), default=None,
              help="Exit 1 when a finding reaches this severity [default: the policy's check.fail_on, else "
                   "warning].")
@click.option("--pid", "pids", type=int, multiple=True,
              help="Also run audit's locality rules on this process (repeatable).")
@format_option("text", "json", "junit")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to this file instead of stdout (the exit status is unchanged).")
@click.option("--verbose", "-v", is_flag=True, help="Text: list the checks that passed too.")
@click.pass_obj
def check_cmd(
    app: App,
    policy_path: Path | None,
    fail_on: str | None,
    pids: tuple[int, ...],
    fmt: str,
    output: Path | None,
    verbose: bool,
) -> None:
    """Run every finding rule (inspect's, irq's, audit's with --pid) and a policy's expectations.

    Exit status: 0 when no finding reaches --fail-on, 1 when one does, 2 for usage errors and 3
    when the root or the policy cannot be read. A check that cannot run on this root (no
    /proc/interrupts, numactl's version on a saved tree) is reported as skipped, never as passed.
    """
    from numatune.analysis.check import fails
    from numatune.analysis.policy import load_policy
    from numatune.check_run import fail_level, run_checks
    from numatune.errors import ExitCode, InputError
    from numatune.readers.pci import pci_ids_from_env

    policy = load_policy(policy_path) if policy_path is not None else None
    level = fail_level(fail_on, policy)
    results, topo = run_checks(app.host, policy, pids, pci_ids_from_env())
    source = app.root
    policy_name = str(policy_path) if policy_path is not None else None

    if fmt == "json":
        from numatune.render.check_json import check_document
        from numatune.render.envelope import dumps

        text = dumps(check_document(source, policy_name, level, results, topo.skipped)) + "\n"
    elif fmt == "junit":
        from numatune.render.junit import check_junit

        text = check_junit(source, level, results)
    else:
        from numatune.render.check_text import render_check_text

        text = render_check_text(source, policy_name, level, results, verbose=verbose)
    if output is not None:
        try:
            output.write_text(text)
        except OSError as exc:
            raise InputError(f"cannot write {output}: {exc.strerror or exc}") from None
    else:
        click.echo(text, nl=False)
    if fmt == "text":
        for s in topo.skipped:
            app.note(f"skipped {s.subject}: {s.reason}")
    if fails(results, level):
        raise click.exceptions.Exit(int(ExitCode.FINDINGS))
