"""Template values reach a shell command as data: a real /bin/sh runs each command."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from flows.expand.shell_command import shell_command, variable_name
from flows.flowfile.templates import Reference

HOSTILE = [
    "$(touch PWNED)",
    "`touch PWNED`",
    "; touch PWNED",
    "x' ; touch PWNED ; echo '",
    'x" ; touch PWNED ; echo "',
    "a\ntouch PWNED",
    "$HOME ${HOME} *",
    "\\$(touch PWNED)\\",
    "a\nEOF\ntouch PWNED",
    "-o PWNED /etc/pass*",
]

# (command, what it prints for value v)
COMMANDS = [
    ("printf %s ${{ params.v }}", "{v}"),
    ('printf %s "${{ params.v }}"', "{v}"),
    ("printf %s '${{ params.v }}'", "{v}"),
    ("printf %s \"<${{ params.v }}>\" '[${{ params.v }}]'", "<{v}>[{v}]"),
    ("printf %s --v=${{ params.v }}", "--v={v}"),
    ("# it's a comment\nprintf %s ${{ params.v }}", "{v}"),
    ('printf %s \\"${{ params.v }}', '"{v}'),
    ("cat <<EOF\n<${{ params.v }}>\nEOF\n", "<{v}>\n"),
    ("cat <<-EOF\n\t${{ params.v }}\n\tEOF\nprintf %s ${{ params.v }}", "{v}\n{v}"),
    ("printf '%s ' $((1<<2)); printf %s ${{ params.v }}", "4 {v}"),
    # A command substitution quotes afresh, inside double quotes too.
    ('out="$(printf [%s] ${{ params.v }})"; printf %s "$out"', "[{v}]"),
    ('out="`printf [%s] ${{ params.v }}`"; printf %s "$out"', "[{v}]"),
    ('printf %s "$(printf %s "${{ params.v }}")"', "{v}"),
    ("printf %s \"$(printf '(%s)' ${{ params.v }})\"", "({v})"),
    ('printf %s "$(echo $((2*(1+1))) | tr -d 4)${{ params.v }}"', "{v}"),
    # `<<` in an arithmetic expansion is a shift: the next line is no here-document.
    ("x=$((1<<2))\nprintf %s ${{ params.v }}", "{v}"),
    # A quoted here-document expands nothing: the variable stays as written.
    ("cat <<'EOF'\n${{ params.v }}\nEOF\n", "${{FLOWS_PARAMS_V}}\n"),
]


def run_shell(command: str, env: dict[str, str], cwd: Path) -> str:
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


@pytest.mark.parametrize("value", HOSTILE)
@pytest.mark.parametrize(("command", "printed"), COMMANDS)
def test_a_hostile_value_is_printed_never_run(
    command: str, printed: str, value: str, tmp_path: Path
) -> None:
    text, env = shell_command(command, lambda reference: value)
    assert value not in text
    assert run_shell(text, env, tmp_path) == printed.format(v=value)
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    "command",
    [
        'echo "total=$(( ${{ params.n }} * 10 ))"',
        "echo total=$(( ${{ params.n }} * 10 ))",
        'echo "total=$(printf %s $(( (${{ params.n }}) * 10 )))"',
    ],
)
def test_a_value_in_an_arithmetic_expansion_is_a_number_there(command: str, tmp_path: Path) -> None:
    """sh reads an arithmetic expansion as if in double quotes, and refuses quotes in it."""
    text, env = shell_command(command, lambda reference: "4")
    assert run_shell(text, env, tmp_path) == "total=40\n"


def test_each_root_has_its_own_variables() -> None:
    names = {
        str(r): variable_name(r)
        for r in (
            Reference(("params", "day")),
            Reference(("run", "id")),
            Reference(("steps", "load", "outputs", "uri")),
            Reference(("output",)),  # a foreach variable named like a runtime variable
        )
    }
    assert names == {
        "params.day": "FLOWS_PARAMS_DAY",
        "run.id": "FLOWS_RUN_ID",
        "steps.load.outputs.uri": "FLOWS_STEPS_LOAD_OUTPUTS_URI",
        "output": "FLOWS_FOREACH_OUTPUT",
    }


def test_references_that_would_share_a_name_get_distinct_ones(tmp_path: Path) -> None:
    values = {"params.a-b": "dash", "params.a_b": "underscore"}
    text, env = shell_command(
        "printf %s ${{ params.a-b }} ${{ params.a_b }} ${{ params.a-b }}",
        lambda reference: values[str(reference)],
    )
    assert env == {"FLOWS_PARAMS_A_B": "dash", "FLOWS_PARAMS_A_B_2": "underscore"}
    assert run_shell(text, env, tmp_path) == "dashunderscoredash"
